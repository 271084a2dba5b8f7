from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

from inspector import oidc, views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(
        extra_context={"oidc_provider_name": settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else ""}
    ), name="login"),
    path("oidc/authenticate/", login_not_required(oidc.SignInView.as_view()), name="oidc_authenticate"),
    path("oidc/callback/", login_not_required(oidc.CallbackView.as_view()), name="oidc_callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/tokens/", views.tokens, name="tokens"),
    path("account/tokens/new/", views.token_create, name="token_create"),
    path("account/tokens/<int:pk>/delete/", views.token_delete, name="token_delete"),
    path("sandbox/proxy/", views.sandbox_proxy, name="sandbox_proxy"),
    path("admin/", admin.site.urls),
    path("", include("tools.urls")),
    path("", include("chat.urls")),
]
