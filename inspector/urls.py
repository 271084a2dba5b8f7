from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

from inspector import views


def _oidc_view(name: str):
    """inspector/oidc.py's view, imported at the first sign-in: it brings requests and PyJWT
    (~0.1-0.3 s), which no process should pay at start-up for a page that may never be used."""

    @login_not_required
    def view(request, *args, **kwargs):
        from inspector import oidc

        return getattr(oidc, name).as_view()(request, *args, **kwargs)

    return view


urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(
        extra_context={"oidc_provider_name": settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else ""}
    ), name="login"),
    path("oidc/authenticate/", _oidc_view("SignInView"), name="oidc_authenticate"),
    path("oidc/callback/", _oidc_view("CallbackView"), name="oidc_callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/tokens/", views.tokens, name="tokens"),
    path("account/tokens/new/", views.token_create, name="token_create"),
    path("account/tokens/<int:pk>/delete/", views.token_delete, name="token_delete"),
    path("sandbox/proxy/", views.sandbox_proxy, name="sandbox_proxy"),
    path("admin/", admin.site.urls),
    path("", include("tools.urls")),
    path("", include("chat.urls")),
    path("", include("evals.urls")),
    path("", include("review.urls")),
]
