"""The JSON-RPC frame log."""

from __future__ import annotations

from typing import Any

from django.db import models

from tools.models.servers import Server


class RpcFrame(models.Model):
    """One JSON-RPC message in or out, raw as on the wire."""

    IN, OUT = "in", "out"
    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="frames")
    direction = models.CharField(max_length=3, choices=[(IN, "in"), (OUT, "out")])
    method = models.CharField(max_length=200, blank=True, db_index=True)
    rpc_id = models.CharField(max_length=100, blank=True)
    kind = models.CharField(max_length=20, blank=True, help_text="request, notification, response or error")
    payload = models.JSONField()
    size_bytes = models.PositiveBigIntegerField(default=0)
    truncated = models.BooleanField(default=False, help_text="The payload is a preview: the frame was larger than RPC_FRAME_MAX_BYTES.")
    at = models.DateTimeField(db_index=True)
    latency_ms = models.FloatField(null=True, blank=True, help_text="For responses: time since the request.")

    class Meta:
        verbose_name = "JSON-RPC frame"
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["server", "-at"])]

    def as_event(self) -> dict[str, Any]:
        return {
            "id": self.pk, "server_id": self.server_id, "direction": self.direction, "method": self.method,
            "rpc_id": self.rpc_id, "kind": self.kind, "payload": self.payload, "size_bytes": self.size_bytes,
            "truncated": self.truncated,
            "latency_ms": self.latency_ms, "at": self.at.isoformat(),
        }
