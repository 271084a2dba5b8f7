"""Per-user API tokens. Only a hash is stored; the key is shown once when created."""

from __future__ import annotations

import functools
import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import connection, models
from django.utils import timezone

from inspector.sql_columns import Columns


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
        row = _token_row(_digest(key))
        if row is None:
            return None
        token_columns, user_columns, _ = _token_query()
        token = token_columns.build(row[: len(token_columns)])
        user = user_columns.build(row[len(token_columns): -1])
        if not user.is_active:
            return None
        user._inspector_is_viewer = bool(row[-1])  # roles.is_viewer's per-user-object cache
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= cls.LAST_USED_PRECISION:
            cls.objects.filter(pk=token.pk).update(last_used_at=now)
        return user


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


@functools.cache
def _token_query():
    """The token, its user and whether that user is a viewer, in one SELECT built once: the ORM's
    version (select_related with an Exists annotation) was a fifth of daphne's Python time per
    API call under bench/hot_path.py, compiling it (inspector/sql_columns.py)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user_model = get_user_model()
    membership = user_model.groups.through
    q = connection.ops.quote_name
    token_columns = Columns(ApiToken, "t", keep=lambda f: f.name == "last_used_at")
    user_columns = Columns(user_model, "u")

    def col(model, name: str) -> str:
        return q(model._meta.get_field(name).column)

    sql = (
        f"SELECT {token_columns.sql}, {user_columns.sql}, EXISTS(SELECT 1 FROM {q(membership._meta.db_table)} m "
        f"JOIN {q(Group._meta.db_table)} g ON g.{q(Group._meta.pk.column)} = m.{col(membership, 'group')} "
        f"WHERE m.{col(membership, 'user')} = t.{col(ApiToken, 'user')} AND g.{col(Group, 'name')} = %s) "
        f"FROM {q(ApiToken._meta.db_table)} t JOIN {q(user_model._meta.db_table)} u "
        f"ON u.{q(user_model._meta.pk.column)} = t.{col(ApiToken, 'user')} WHERE t.{col(ApiToken, 'digest')} = %s"
    )
    return token_columns, user_columns, sql


def _token_row(digest: str):
    from inspector.roles import VIEWER_GROUP

    with connection.cursor() as cursor:
        cursor.execute(_token_query()[2], [VIEWER_GROUP, digest])
        return cursor.fetchone()
