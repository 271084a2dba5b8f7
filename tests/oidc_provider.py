"""A real OpenID Connect provider for the sign-in tests: django-oauth-toolkit with OIDC on, in its
own process on a loopback port.

    python tests/oidc_provider.py PORT DATA_DIR REDIRECT_URI

It serves discovery (/o/.well-known/openid-configuration), authorize, token, userinfo and JWKS
(RS256, a key made at start), a login form at /login/, and knows the people in PEOPLE. The
inspector's test client is CLIENT_ID / CLIENT_SECRET, confidential, PKCE required, consent skipped.
Its cookies have their own names: on 127.0.0.1 cookies ignore the port, and the app's session
cookie must not be overwritten by the provider's.
"""

from __future__ import annotations

import sys
from pathlib import Path

CLIENT_ID = "inspector-test-client"
CLIENT_SECRET = "oidc-test-client-secret-5b1e9d7a"
PROVIDER_NAME = "Team IdP"
# username, password, email, groups
PEOPLE = [
    ("alice", "alice-idp-pass", "alice@team.example", ["engineering"]),
    ("victor", "victor-idp-pass", "victor@team.example", ["inspector-viewers"]),
    ("mallory", "mallory-idp-pass", "mallory@elsewhere.example", ["engineering"]),
]

LOGIN_TEMPLATE = """<!doctype html><title>Team IdP sign-in</title><h1>Team IdP</h1>
<form method="post">{% csrf_token %}{{ form.as_p }}<input type="hidden" name="next" value="{{ next }}">
<button type="submit" id="idp-submit">Sign in to Team IdP</button></form>"""


def main(port: int, data_dir: Path, redirect_uri: str) -> None:
    import django
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from django.conf import settings

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    data_dir.mkdir(parents=True, exist_ok=True)
    settings.configure(
        DEBUG=False,
        SECRET_KEY="oidc-test-provider-not-secret",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions", "oauth2_provider"],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": data_dir / "provider.sqlite3"}},
        TEMPLATES=[{
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "OPTIONS": {
                "loaders": [("django.template.loaders.locmem.Loader", {"registration/login.html": LOGIN_TEMPLATE}),
                            "django.template.loaders.app_directories.Loader"],
                "context_processors": ["django.template.context_processors.request",
                                       "django.contrib.auth.context_processors.auth"],
            },
        }],
        SESSION_COOKIE_NAME="idp_sessionid",
        CSRF_COOKIE_NAME="idp_csrftoken",
        LOGIN_URL="/login/",
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        OAUTH2_PROVIDER={
            "OIDC_ENABLED": True,
            "OIDC_RSA_PRIVATE_KEY": key,
            "OIDC_ISS_ENDPOINT": f"http://127.0.0.1:{port}/o",
            "PKCE_REQUIRED": True,
            "SCOPES": {"openid": "OpenID Connect", "email": "Email", "profile": "Profile"},
            "OAUTH2_VALIDATOR_CLASS": "__main__.Validator",
        },
    )
    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0, interactive=False)
    for username, password, email, groups in PEOPLE:
        user, _ = User.objects.get_or_create(username=username, defaults={"email": email})
        user.set_password(password)
        user.save()
        user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])
    Application.objects.filter(client_id=CLIENT_ID).delete()
    Application.objects.create(
        name="MCP Inspector (test)", client_id=CLIENT_ID, client_secret=CLIENT_SECRET, hash_client_secret=True,
        client_type=Application.CLIENT_CONFIDENTIAL, authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=redirect_uri, algorithm=Application.RS256_ALGORITHM, skip_authorization=True,
    )

    from django.core.servers.basehttp import run
    from django.core.wsgi import get_wsgi_application

    print(f"provider ready on {port}", flush=True)
    run("127.0.0.1", port, get_wsgi_application(), threading=True)


def _validator_class():
    from oauth2_provider.oauth2_validators import OAuth2Validator

    class Validator(OAuth2Validator):
        """Every claim in the ID token and userinfo, whatever the scopes: email, name and groups."""

        oidc_claim_scope = None

        def get_additional_claims(self, request):
            user = request.user
            return {
                "email": user.email, "email_verified": True, "preferred_username": user.username,
                "given_name": user.username.capitalize(), "groups": sorted(g.name for g in user.groups.all()),
            }

    return Validator


def _urls():
    from django.contrib.auth import views as auth_views
    from django.urls import include, path

    return [
        path("login/", auth_views.LoginView.as_view()),
        path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    ]


_built: dict[str, object] = {}


def __getattr__(name: str):
    # The settings name `__main__.Validator` and this module's `urlpatterns`: both are built on
    # first use, once Django is set up (importing this module from a test must not need Django's).
    builders = {"Validator": _validator_class, "urlpatterns": _urls}
    if name not in builders:
        raise AttributeError(name)
    if name not in _built:
        _built[name] = builders[name]()
    return _built[name]


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
