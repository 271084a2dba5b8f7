"""Per-user API tokens. Only a hash is stored; the key is shown once when created."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Exists, OuterRef
from django.utils import timezone


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="default")
    prefix = models.CharField(max_length=12, help_text="First characters of the key, to recognise it.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.user} · {self.name} ({self.prefix}…)"

    @classmethod
    def issue(cls, user, name: str = "default") -> tuple["ApiToken", str]:
        """Create a token and return it with its clear key, which is never stored."""
        key = "mcpi_" + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, prefix=key[:12], digest=_digest(key))
        return token, key

    # "Last used" is for people reviewing tokens: a minute's precision is plenty, and a write on
    # every API request was a third of the cost of a manual tool call.
    LAST_USED_PRECISION = timedelta(seconds=60)

    @classmethod
    def authenticate(cls, key: str):
        """The active user of a valid key, else None. One query also tells whether the user is a
        viewer (inspector/roles.py reads it on every unsafe request: a second query per POST)."""
        from django.contrib.auth import get_user_model

        from inspector.roles import VIEWER_GROUP

        memberships = get_user_model().groups.through.objects.filter(user_id=OuterRef("user_id"), group__name=VIEWER_GROUP)
        token = (cls.objects.select_related("user").annotate(user_is_viewer=Exists(memberships))
                 .filter(digest=_digest(key)).first())
        if token is None or not token.user.is_active:
            return None
        token.user._inspector_is_viewer = token.user_is_viewer  # roles.is_viewer's per-user-object cache
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= cls.LAST_USED_PRECISION:
            cls.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user


class SignInIdentity(models.Model):
    """Who a user is at the team's OpenID Connect provider (inspector/oidc.py).

    Matched by issuer and subject, which the provider never reassigns, rather than by email, which
    can change or be claimed unverified: a local account is linked by email only once, and only
    when the provider says the email is verified.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_in_identities")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    email = models.CharField(max_length=254, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="one_user_per_oidc_subject")]
        verbose_name = "sign-in identity"
        verbose_name_plural = "sign-in identities"

    def __str__(self) -> str:
        return f"{self.email or self.subject} at {self.issuer}"
