"""Results kept while their server's cache hint says they are fresh (2026-07-28 `ttlMs`/`cacheScope`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tools.models.servers import Server


class CachedResult(models.Model):
    """One cacheable result of a server (a list, or one resource's `resources/read`) and until when
    it is fresh (tools/runtime/result_cache.py). The tools list itself is the server's Tool rows:
    its entry only says until when they need no new `tools/list`. `user` is the authorization
    context of a private result on an OAuth server (each user's own token); empty when anyone may
    reuse it (a public result, or a server whose one connection serves everyone)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="cached_results")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    method = models.CharField(max_length=40)
    key = models.TextField(blank=True, help_text="What else the request named: the URI of a resources/read.")
    scope = models.CharField(max_length=10, default="private", help_text="The result's cacheScope: public or private.")
    ttl_ms = models.PositiveBigIntegerField(default=0)
    result = models.JSONField(default=dict, blank=True)
    fetched_at = models.DateTimeField()
    fresh_until = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["server", "method"])]

    def __str__(self) -> str:
        return f"{self.method} {self.key} of {self.server_id} until {self.fresh_until:%H:%M:%S}"
