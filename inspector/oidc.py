"""Team sign-in with OpenID Connect, through mozilla-django-oidc.

The operator sets OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET; everything else about the
provider (endpoints, signing algorithm) comes from its `/.well-known/openid-configuration`,
fetched when someone signs in (never while a process starts, nor on an ordinary request: a
provider that is down costs only the sign-ins). The library does the code flow with state,
nonce and PKCE; this module adds discovery, the checks the library leaves out (the ID token's
issuer and audience), who may sign in (email domains, groups), the account a first sign-in
creates, roles from the provider's groups, and pages that say why a sign-in did not happen.

The client secret is read from the environment by settings.py and sent only in the token
request's body; no page, log line or error message carries it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from inspector import roles

log = logging.getLogger(__name__)

DISCOVERY_TTL = 3600.0
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be fetched or does not describe this issuer."""


_discovery_lock = threading.Lock()
_discovered: dict[str, Any] = {"issuer": None, "at": 0.0, "doc": None}


def discovery() -> dict[str, Any]:
    """The issuer's OpenID configuration, fetched once an hour per process."""
    issuer = settings.OIDC_ISSUER
    with _discovery_lock:
        if _discovered["issuer"] == issuer and time.monotonic() - _discovered["at"] < DISCOVERY_TTL:
            return _discovered["doc"]
    parts = urlsplit(issuer)
    if parts.scheme != "https" and not (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS):
        raise ProviderUnavailable("OIDC_ISSUER must be an https:// address (plain http only on loopback).")
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        doc = response.json()
    except (requests.RequestException, ValueError) as exc:
        log.warning("OIDC discovery failed at %s: %s", url, exc.__class__.__name__)
        raise ProviderUnavailable(f"The sign-in provider at {issuer} did not answer.") from exc
    if str(doc.get("issuer", "")).rstrip("/") != issuer:
        raise ProviderUnavailable(f"The provider's configuration names issuer {doc.get('issuer')!r}, not {issuer!r}.")
    missing = [key for key in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not doc.get(key)]
    if missing:
        raise ProviderUnavailable(f"The provider's configuration lacks {', '.join(missing)}.")
    with _discovery_lock:
        _discovered.update(issuer=issuer, at=time.monotonic(), doc=doc)
    return doc


def signing_algorithm() -> str:
    """RS256 when the provider offers it (every provider must), else the first it offers but "none"."""
    offered = [a for a in discovery().get("id_token_signing_alg_values_supported") or ["RS256"] if a != "none"]
    return "RS256" if "RS256" in offered or not offered else offered[0]


def _email_domain(email: str) -> str:
    return email.rpartition("@")[2].lower() if "@" in email else ""


def claimed_groups(claims: dict[str, Any]) -> set[str]:
    """The groups claim (OIDC_GROUPS_CLAIM) as a set: a list, or one space- or comma-separated string."""
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        return {g for g in re.split(r"[\s,]+", value) if g}
    if isinstance(value, (list, tuple)):
        return {str(g) for g in value}
    return set()


def admission_refusal(claims: dict[str, Any]) -> str | None:
    """Why these claims may not sign in (a sentence for the person), or None when they may."""
    email = str(claims.get("email") or "")
    if settings.OIDC_ALLOWED_DOMAINS:
        domain = _email_domain(email)
        if not domain:
            return "Your account at the sign-in provider has no email address, and this inspector admits people by email domain."
        if domain not in settings.OIDC_ALLOWED_DOMAINS:
            allowed = ", ".join(settings.OIDC_ALLOWED_DOMAINS)
            return f"Accounts of {domain} may not sign in to this inspector (allowed: {allowed})."
        if claims.get("email_verified") is False:
            return f"The sign-in provider has not verified the address {email}."
    if settings.OIDC_ALLOWED_GROUPS and not claimed_groups(claims) & set(settings.OIDC_ALLOWED_GROUPS):
        return "Your account is in none of the groups allowed to sign in to this inspector."
    return None


def role_from_groups(claims: dict[str, Any]) -> str | None:
    """The role the provider's groups give, when OIDC_ADMIN_GROUPS or OIDC_VIEWER_GROUPS is set."""
    if not (settings.OIDC_ADMIN_GROUPS or settings.OIDC_VIEWER_GROUPS):
        return None
    groups = claimed_groups(claims)
    if groups & set(settings.OIDC_ADMIN_GROUPS):
        return roles.ADMIN
    if groups & set(settings.OIDC_VIEWER_GROUPS):
        return roles.VIEWER
    return roles.MEMBER


def _free_username(claims: dict[str, Any]) -> str:
    """The email (or preferred_username, or the subject) as a valid username no one has yet."""
    base = str(claims.get("email") or claims.get("preferred_username") or f"oidc-{claims['sub']}")
    base = re.sub(r"[^\w.@+-]", "-", base)[:140] or "oidc-user"
    User = get_user_model()
    name, n = base, 1
    while User.objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, with the provider's endpoints taken from discovery."""
    from_discovery = {
        "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
        "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
        "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
        "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    }
    if attr in from_discovery:
        return discovery().get(from_discovery[attr])
    if attr == "OIDC_RP_SIGN_ALGO":
        return signing_algorithm()
    return import_from_settings(attr, *default)


class SignInBackend(OIDCAuthenticationBackend):
    """The library's code-flow backend, matching users by issuer + subject (SignInIdentity)."""

    get_settings = staticmethod(_setting)
    OIDC_RP_IDP_SIGN_KEY = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django builds a backend on every request of a signed-in user: read nothing from the
        # provider here (the parent reads every endpoint), only when a sign-in needs it.
        self.UserModel = get_user_model()

    OIDC_RP_CLIENT_ID = property(lambda self: settings.OIDC_CLIENT_ID)
    OIDC_RP_CLIENT_SECRET = property(lambda self: settings.OIDC_CLIENT_SECRET)
    OIDC_OP_TOKEN_ENDPOINT = property(lambda self: discovery()["token_endpoint"])
    OIDC_OP_USER_ENDPOINT = property(lambda self: discovery().get("userinfo_endpoint"))
    OIDC_OP_JWKS_ENDPOINT = property(lambda self: discovery()["jwks_uri"])
    OIDC_RP_SIGN_ALGO = property(lambda self: signing_algorithm())

    def authenticate(self, request: HttpRequest | None, **kwargs: Any):
        # Only the callback view passes a nonce: a local login form posted to a URL that happens
        # to carry ?code=&state= must not start a token exchange.
        if request is None or "nonce" not in kwargs or not settings.OIDC_ENABLED:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except ProviderUnavailable as exc:
            request.oidc_refusal = str(exc)
        except SuspiciousOperation as exc:  # a token that fails a check: signature, issuer, audience, nonce
            log.warning("OIDC sign-in refused: %s", exc)
            request.oidc_refusal = "The sign-in provider's answer could not be verified, so you were not signed in."
        except requests.RequestException as exc:
            # The message may quote the provider's answer, never our request body (the secret).
            log.warning("OIDC sign-in failed talking to the provider: %s", exc.__class__.__name__)
            request.oidc_refusal = "The sign-in provider could not be reached to finish signing in. Try again."
        return None

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The library checks the signature, expiry and nonce; the issuer and audience are checked here."""
        payload = super().verify_token(token, **kwargs)
        if str(payload.get("iss", "")).rstrip("/") != settings.OIDC_ISSUER:
            raise SuspiciousOperation("ID token from another issuer")
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if settings.OIDC_CLIENT_ID not in audiences:
            raise SuspiciousOperation("ID token for another client")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The ID token's claims, completed by the userinfo endpoint's when the provider has one."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            info = super().get_userinfo(access_token, id_token, payload)
            if info.get("sub") != payload.get("sub"):
                return {}  # refused below: userinfo about someone else
            claims.update(info)
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]):
        from inspector.models import SignInIdentity

        claims = self.get_userinfo(access_token, id_token, payload)
        if not claims.get("sub"):
            self.request.oidc_refusal = "The sign-in provider's answer did not say who you are."
            return None
        refusal = admission_refusal(claims)
        email = str(claims.get("email") or "")
        if refusal:
            log.info("OIDC sign-in refused for %s: %s", email or claims["sub"], refusal)
            self.request.oidc_refusal = refusal
            return None
        identity = SignInIdentity.objects.select_related("user").filter(
            issuer=settings.OIDC_ISSUER, subject=str(claims["sub"])
        ).first()
        if identity is None:
            identity = SignInIdentity(issuer=settings.OIDC_ISSUER, subject=str(claims["sub"]))
            identity.user = self._linked_or_new_user(claims)
        user = identity.user
        if not user.is_active:
            self.request.oidc_refusal = "This account has been disabled in the inspector. Ask an admin."
            return None
        identity.email = email[:254]
        identity.last_sign_in_at = timezone.now()
        identity.save()
        self.update_user(user, claims)
        return user

    def _linked_or_new_user(self, claims: dict[str, Any]):
        """A first sign-in: the local account with this email when the provider verified it, else a new member."""
        email = str(claims.get("email") or "")
        if email and claims.get("email_verified") is True:
            existing = self.UserModel.objects.filter(email__iexact=email, sign_in_identities__isnull=True)
            if existing.count() == 1:
                log.info("OIDC sign-in linked to the existing account with email %s", email)
                return existing.get()
        user = self.UserModel.objects.create_user(_free_username(claims), email=email)
        user.set_unusable_password()  # signs in only through the provider, until an admin sets one
        user.save()
        log.info("OIDC sign-in created account %s", user.get_username())
        return user

    def update_user(self, user, claims: dict[str, Any]):
        """Name, email and (when group mapping is set) role follow the provider at each sign-in."""
        changed = []
        for field, claim in (("first_name", "given_name"), ("last_name", "family_name"), ("email", "email")):
            value = str(claims.get(claim) or "")[:150]
            if value and getattr(user, field) != value:
                setattr(user, field, value)
                changed.append(field)
        if changed:
            user.save(update_fields=changed)
        role = role_from_groups(claims)
        if role is not None and role != roles.role_of(user):
            roles.set_role(user, role)
        return user


class SignInView(OIDCAuthenticationRequestView):
    """GET /oidc/authenticate/: off to the provider (state, nonce and PKCE kept in the session)."""

    get_settings = staticmethod(_setting)
    OIDC_RP_CLIENT_ID = property(lambda self: settings.OIDC_CLIENT_ID)

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the parent reads the endpoints here; get() does, when asked

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Sign-in with a provider is not configured.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = discovery()["authorization_endpoint"]
        except ProviderUnavailable as exc:
            return refused_page(request, str(exc), status=503)
        return super().get(request)


class CallbackView(OIDCAuthenticationCallbackView):
    """GET /oidc/callback/: the provider sends the person back here with a code (or an error)."""

    get_settings = staticmethod(_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Sign-in with a provider is not configured.")
        return super().get(request)

    def login_failure(self) -> HttpResponse:
        request = self.request
        reason = getattr(request, "oidc_refusal", None)
        if reason is None and request.GET.get("error"):
            reason = f"The sign-in provider answered “{request.GET['error']}”: {request.GET.get('error_description', '')}".rstrip(": ")
        if reason is None:
            reason = "The sign-in could not be completed (it may have expired, or been opened in another browser). Try again."
        return refused_page(request, reason, status=403)


def refused_page(request: HttpRequest, reason: str, status: int) -> HttpResponse:
    """A page that says why the person is not signed in, with the ways back."""
    return render(
        request,
        "registration/oidc_refused.html",
        {"reason": reason, "provider_name": settings.OIDC_PROVIDER_NAME},
        status=status,
    )
