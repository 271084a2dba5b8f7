"""MCP servers, their cached tool definitions, the JSON-RPC log, and tool calls with their two result rows.

The invariant of the product lives here: a tool call's result is stored twice, as a
`ToolResult` (the full wire result, for browsers and widgets) and a `Projection` (what the
LLM may see). Code that builds LLM requests reads only `Projection`.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from inspector.encrypted import EncryptedJSONField


class Transport(models.TextChoices):
    STDIO = "stdio", "stdio"
    STREAMABLE_HTTP = "streamable_http", "Streamable HTTP"
    SSE = "sse", "SSE (legacy)"


class Policy(models.TextChoices):
    CONTENT_FIRST = "content-first", "content-first (content to the model; structuredContent only if no content)"
    STRICT = "strict", "strict (as for App tools: no structuredContent, no _meta)"
    FORWARD_ALL = "forward-all", "forward-all (whole result, for debugging)"


class ServerQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ServerQuerySet":
        """A user's own servers and those shared with the team."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(owner=user) | Q(shared=True))


class Server(models.Model):
    name = models.CharField(max_length=100)
    transport = models.CharField(max_length=20, choices=Transport.choices, default=Transport.STREAMABLE_HTTP)
    # stdio
    command = models.CharField(max_length=500, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = EncryptedJSONField(help_text="Environment variables for the stdio process (encrypted).")
    cwd = models.CharField("working directory", max_length=500, blank=True)
    # HTTP / SSE
    url = models.URLField("URL", max_length=1000, blank=True)
    headers = EncryptedJSONField(help_text="HTTP headers, e.g. Authorization (encrypted).")

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_servers")
    shared = models.BooleanField("shared with the team", default=False)
    enabled = models.BooleanField(default=True)
    projection_policy = models.CharField(max_length=20, choices=Policy.choices, default=Policy.CONTENT_FIRST)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # What the last connection told us (written by workers).
    server_info = models.JSONField(default=dict, blank=True)
    protocol_version = models.CharField(max_length=40, blank=True)
    capabilities = models.JSONField(default=dict, blank=True)
    instructions = models.TextField(blank=True)
    last_connected_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    objects = ServerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def config(self):
        """The connection settings a worker's pool keys its warm connection on."""
        from tools.connection import ServerConfig

        return ServerConfig(
            key=str(self.pk),
            name=self.name,
            transport=self.transport,
            command=self.command,
            args=tuple(str(a) for a in self.args or ()),
            env=tuple(sorted((str(k), str(v)) for k, v in (self.env or {}).items())),
            cwd=self.cwd or None,
            url=self.url or None,
            headers=tuple(sorted((str(k), str(v)) for k, v in (self.headers or {}).items())),
            connect_timeout=settings.MCP_CONNECT_TIMEOUT,
            call_timeout=settings.MCP_CALL_TIMEOUT,
        )

    def to_config_entry(self) -> dict[str, Any]:
        """This server in the common `mcpServers` JSON format (secrets included: for export only)."""
        if self.transport == Transport.STDIO:
            entry: dict[str, Any] = {"command": self.command, "args": list(self.args or [])}
            if self.env:
                entry["env"] = dict(self.env)
            if self.cwd:
                entry["cwd"] = self.cwd
        else:
            entry = {"url": self.url}
            if self.transport == Transport.SSE:
                entry["type"] = "sse"
            if self.headers:
                entry["headers"] = dict(self.headers)
        return entry


def app_resource_uri(meta: dict | None) -> str:
    """The UI resource of an MCP App tool, from any of the three places hosts have used."""
    meta = meta or {}
    ui = meta.get("ui")
    if isinstance(ui, dict) and isinstance(ui.get("resourceUri"), str):
        return ui["resourceUri"]
    for key in ("ui/resourceUri", "openai/outputTemplate"):
        if isinstance(meta.get(key), str):
            return meta[key]
    return ""


def tool_visibility(meta: dict | None) -> list[str]:
    ui = (meta or {}).get("ui")
    if isinstance(ui, dict) and isinstance(ui.get("visibility"), list):
        return [v for v in ui["visibility"] if isinstance(v, str)]
    return ["model", "app"]


class Tool(models.Model):
    """A tool definition as last listed by its server (a cache, refreshed on connect and list_changed)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=200)
    title = models.CharField(max_length=300, blank=True)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict, blank=True)
    output_schema = models.JSONField(null=True, blank=True)
    annotations = models.JSONField(null=True, blank=True)
    meta = models.JSONField(null=True, blank=True)
    definition = models.JSONField(default=dict, help_text="The tool exactly as listed on the wire.")
    is_app = models.BooleanField(default=False)
    ui_resource_uri = models.CharField(max_length=500, blank=True)
    visibility = models.JSONField(default=list)
    projection_policy = models.CharField(
        max_length=20, choices=Policy.choices, blank=True, help_text="Overrides the server's policy when set."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["server", "name"], name="unique_tool_per_server")]

    def __str__(self) -> str:
        return f"{self.server.name}/{self.name}"

    @property
    def is_openai_widget(self) -> bool:
        return bool((self.meta or {}).get("openai/outputTemplate")) and not ((self.meta or {}).get("ui") or {}).get(
            "resourceUri"
        )

    def effective_policy(self) -> str:
        return self.projection_policy or self.server.projection_policy

    @classmethod
    def fields_from_wire(cls, raw: dict) -> dict[str, Any]:
        meta = raw.get("_meta")
        uri = app_resource_uri(meta)
        return {
            "title": raw.get("title") or ((raw.get("annotations") or {}).get("title") or ""),
            "description": raw.get("description") or "",
            "input_schema": raw.get("inputSchema") or {},
            "output_schema": raw.get("outputSchema"),
            "annotations": raw.get("annotations"),
            "meta": meta,
            "definition": raw,
            "is_app": bool(uri),
            "ui_resource_uri": uri,
            "visibility": tool_visibility(meta),
        }


class RpcFrame(models.Model):
    """One JSON-RPC message in or out, raw as on the wire."""

    IN, OUT = "in", "out"
    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="frames")
    direction = models.CharField(max_length=3, choices=[(IN, "in"), (OUT, "out")])
    method = models.CharField(max_length=200, blank=True, db_index=True)
    rpc_id = models.CharField(max_length=100, blank=True)
    kind = models.CharField(max_length=20, blank=True, help_text="request, notification, response or error")
    payload = models.JSONField()
    size_bytes = models.PositiveIntegerField(default=0)
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
            "latency_ms": self.latency_ms, "at": self.at.isoformat(),
        }


class ToolCallQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ToolCallQuerySet":
        if not user.is_authenticated:
            return self.none()
        if user.is_superuser:
            return self
        return self.filter(Q(requested_by=user) | Q(conversation__owner=user))


class ToolCall(models.Model):
    class Origin(models.TextChoices):
        LLM = "llm", "LLM"
        MANUAL = "manual"
        WIDGET = "widget"
        REPLAY = "replay"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        TIMED_OUT = "timed_out"
        CANCELLED = "cancelled"

    FINAL = {Status.SUCCEEDED, Status.FAILED, Status.TIMED_OUT, Status.CANCELLED}

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        "chat.Conversation", null=True, blank=True, on_delete=models.CASCADE, related_name="tool_calls"
    )
    turn = models.ForeignKey("chat.Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    origin = models.CharField(max_length=10, choices=Origin.choices, db_index=True)
    # A deleted server leaves its calls behind: conversations are rebuilt from their projections.
    server = models.ForeignKey(Server, null=True, on_delete=models.SET_NULL, related_name="tool_calls")
    server_name = models.CharField(max_length=200, blank=True, help_text="The server's name when the call was made.")
    tool_name = models.CharField(max_length=200, db_index=True)
    llm_tool_call_id = models.CharField(max_length=200, blank=True)
    arguments = models.JSONField(default=dict, blank=True)
    is_app = models.BooleanField("app tool", default=False)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    queued_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    celery_task_id = models.CharField(max_length=100, blank=True)
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays")

    objects = ToolCallQuerySet.as_manager()

    class Meta:
        ordering = ["-queued_at"]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"

    def save(self, *args, **kwargs) -> None:
        if self.server_id and not self.server_name:
            self.server_name = self.server.name
        super().save(*args, **kwargs)

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL


class ToolResult(models.Model):
    """The full CallToolResult exactly as received: what browsers and widgets get."""

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="full_result", primary_key=True)
    raw = models.JSONField(help_text="The JSON-RPC `result` as on the wire, unknown fields kept.")
    size_bytes = models.PositiveIntegerField()
    tokens = models.PositiveIntegerField()
    schema_valid = models.BooleanField(null=True, help_text="Null when the tool declares no outputSchema.")
    schema_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)


class Projection(models.Model):
    """What the LLM sees of a tool result. The LLM history is rebuilt from these rows only."""

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="projection", primary_key=True)
    payload = models.JSONField(help_text="The projected result object.")
    text = models.TextField(help_text="The exact tool-message content sent to the model.")
    policy = models.CharField(max_length=20)
    removed = models.JSONField(default=list, help_text="What was removed or truncated, as JSON paths with reasons.")
    truncated = models.BooleanField(default=False)
    size_bytes = models.PositiveIntegerField()
    tokens = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)


class UiResource(models.Model):
    """A cached MCP App view (`ui://` resource), per server and URI; dropped when the server's
    resources change."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="ui_resources")
    uri = models.CharField(max_length=1000)
    mime_type = models.CharField(max_length=100, blank=True)
    html = models.TextField()
    meta = models.JSONField(default=dict, blank=True, help_text="_meta.ui, from the read result first, then the list entry.")
    fetched_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "UI resource"
        constraints = [models.UniqueConstraint(fields=["server", "uri"], name="unique_ui_resource")]


def embedded_ui_resource(result: dict | None) -> dict | None:
    """The first MCP-UI `ui://` embedded resource in a result's content, if any."""
    for block in (result or {}).get("content") or []:
        if isinstance(block, dict) and block.get("type") == "resource":
            res = block.get("resource") or {}
            if str(res.get("uri", "")).startswith("ui://"):
                return res
    return None
