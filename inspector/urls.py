from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from inspector import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/tokens/", views.tokens, name="tokens"),
    path("account/tokens/new/", views.token_create, name="token_create"),
    path("account/tokens/<int:pk>/delete/", views.token_delete, name="token_delete"),
    path("sandbox/proxy/", views.sandbox_proxy, name="sandbox_proxy"),
    path("admin/", admin.site.urls),
    path("", include("tools.urls")),
    path("", include("chat.urls")),
]
