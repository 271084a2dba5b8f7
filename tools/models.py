"""MCP servers, their cached tool definitions, the JSON-RPC log, and tool calls with their two result rows.

The invariant of the product lives here: a tool call's result is stored twice, as a
`ToolResult` (the full wire result, for browsers and widgets) and a `Projection` (what the
LLM may see). Code that builds LLM requests reads only `Projection`.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied, ValidationError
from django.db import models
from django.db.models import Q

from inspector.encrypted import EncryptedJSONField, EncryptedTextField
from tools import callers
from tools.mcp import url_secrets
from tools.mcp.config import ServerConfig
from tools.runtime.projection import is_ui_resource

STDIO_STAFF_ONLY = (
    "Only staff users can create or edit stdio servers: a stdio server runs a command on the "
    "inspector's host. Ask an admin, or register the server over Streamable HTTP or SSE."
)


class Transport(models.TextChoices):
    STDIO = "stdio", "stdio"
    STREAMABLE_HTTP = "streamable_http", "Streamable HTTP"
    SSE = "sse", "SSE (legacy)"


class Policy(models.TextChoices):
    CONTENT_FIRST = "content-first", "content-first (content to the model; structuredContent only if no content)"
    STRICT = "strict", "strict (as for App tools: no structuredContent, no _meta)"
    FORWARD_ALL = "forward-all", "forward-all (whole result, for debugging)"


class LogLevel(models.TextChoices):
    """MCP logging levels (RFC 5424 names), lowest first."""

    DEBUG = "debug"
    INFO = "info"
    NOTICE = "notice"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"
    ALERT = "alert"
    EMERGENCY = "emergency"


def pool_key(server_id: int, user_id: int | None = None) -> str:
    """What a worker's pool keys a connection on (and frames and server requests are filed under):
    the server, and on an OAuth server the user whose sign-in it carries (tools/runtime/oauth.py)."""
    return f"{server_id}/user-{user_id}" if user_id is not None else str(server_id)


def parse_pool_key(key: str | int | None) -> tuple[int, int | None]:
    """(server id, user id or None) back from a pool key."""
    server, _, user = str(key).partition("/user-")
    return int(server), int(user) if user else None


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
    # The URL with its secrets masked (`https://user:********@host/mcp?token=********`); the
    # password and secret query values live encrypted in url_secrets (tools/mcp/url_secrets.py).
    url = models.URLField(
        "URL", max_length=1000, blank=True,
        help_text="A password or token in the URL (user:password@, ?token=…) is encrypted and shown masked; "
        "keep the mask to keep it.",
    )
    url_secrets = EncryptedJSONField(help_text="The URL's password and secret query values (encrypted).")
    headers = EncryptedJSONField(help_text="HTTP headers, e.g. Authorization (encrypted).")
    # OAuth 2.1 (tools/runtime/oauth.py): each user signs in with their own account; tokens are per user
    # (OAuthGrant). The client is pre-registered (id, secret) or registered dynamically once.
    auth = models.CharField(
        "authorization", max_length=10, choices=[("none", "none (or headers)"), ("oauth", "OAuth 2.1 (each user signs in)")],
        default="none",
    )
    oauth_client_id = models.CharField(
        "OAuth client id", max_length=300, blank=True,
        help_text="A client registered with the authorization server; blank: register one dynamically.",
    )
    oauth_client_secret = EncryptedTextField("OAuth client secret", blank=True, default="",
                                             help_text="With a pre-registered client id, if it has one (encrypted).")
    oauth_scope = models.CharField("OAuth scope", max_length=500, blank=True,
                                   help_text="Scopes to ask for; blank: what the server's metadata says.")
    oauth_client = EncryptedJSONField(help_text="The dynamically registered client (encrypted): id, secret, metadata.")
    # The OAuth client credentials extension (tools/mcp/oauth_grants.py): the server's own client gets
    # each user's token with its secret or private key, no browser sign-in.
    oauth_grant = models.CharField(
        "OAuth grant", max_length=30, default="authorization_code",
        choices=[("authorization_code", "authorization code (each user signs in)"),
                 ("client_credentials", "client credentials (machine to machine, no sign-in)")],
    )
    oauth_client_auth = models.CharField(
        "OAuth client authentication", max_length=30, blank=True, default="",
        choices=[("", "automatic"), ("client_secret_basic", "client_secret_basic"),
                 ("client_secret_post", "client_secret_post"), ("private_key_jwt", "private_key_jwt (RFC 7523)")],
        help_text="Client credentials: how the client proves itself at the token endpoint; automatic: "
        "private_key_jwt with a private key, else client_secret_basic.",
    )
    oauth_private_key = EncryptedTextField("OAuth private key (PEM)", blank=True, default="",
                                           help_text="private_key_jwt: the client's private key, PEM, EC or RSA (encrypted).")

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_servers")
    shared = models.BooleanField("shared with the team", default=False)
    enabled = models.BooleanField(default=True)
    projection_policy = models.CharField(max_length=20, choices=Policy.choices, default=Policy.CONTENT_FIRST)
    # What this client offers the server (tools/runtime/server_requests/ answers roots/list from it).
    roots = models.JSONField(
        default=list, blank=True,
        help_text='Roots answered to the server\'s roots/list: [{"uri": "file:///…", "name": "…"}].',
    )
    log_level = models.CharField(
        max_length=10, choices=LogLevel.choices, blank=True,
        help_text="Sent as logging/setLevel after connecting (servers that support logging); blank: the server's default.",
    )
    call_timeout = models.PositiveIntegerField(
        "call timeout (s)", null=True, blank=True,
        help_text="Seconds a tool call may wait for an answer (progress notifications extend it, up to the hard "
        "maximum); blank: the inspector's default.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # What the last connection told us (written by workers).
    server_info = models.JSONField(default=dict, blank=True)
    protocol_version = models.CharField(max_length=40, blank=True)
    capabilities = models.JSONField(default=dict, blank=True)
    instructions = models.TextField(blank=True)
    last_connected_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # Listed tools set aside for an invalid x-mcp-header (tools/mcp/tool_headers.py): shown apart, never callable.
    set_aside_tools = models.JSONField(default=list, blank=True)

    objects = ServerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        try:
            url_secrets.resolve(self.url or "", self.url_secrets)
        except url_secrets.UrlSecretError as exc:
            raise ValidationError({"url": str(exc)}) from exc

    def save(self, *args, **kwargs) -> None:
        """Whoever sets `url` (forms, API, import, admin, code), its secrets move to the encrypted
        field here, and a MASK in it keeps the stored secret: the column never holds one in clear."""
        update_fields = kwargs.get("update_fields")
        if update_fields is None or "url" in update_fields:
            self.url, self.url_secrets = url_secrets.resolve(self.url or "", self.url_secrets)
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "url_secrets"}
        super().save(*args, **kwargs)

    @property
    def masked_url(self) -> str:
        """The URL as it may be shown or exported: secrets masked."""
        return url_secrets.mask(self.url or "")

    def real_url(self) -> str:
        """The URL with its secrets, for the connection only (never render or log it)."""
        return url_secrets.reveal(*url_secrets.resolve(self.url or "", self.url_secrets, strict=False))

    def offers(self, capability: str) -> bool:
        """Whether the server advertised `capability` ("resources", "prompts", "completions")
        when it connected. Asking for what it does not offer only earns a -32601 error; before
        the first connection nothing is known, so ask: the answer will tell."""
        connected = bool(self.protocol_version or self.last_connected_at)
        return not connected or capability in (self.capabilities or {})

    def withheld_tool_names(self) -> list[str]:
        """Tools not offered to the model for now (Tool.withheld), for the pages that list a server's tools."""
        return list(self.tools.exclude(withheld="").values_list("name", flat=True))

    def check_editable_by(self, user, doing: str = "edit") -> None:
        """Raise PermissionDenied unless `user` may change this server: its owner (or a superuser),
        and staff for a stdio server, since it runs a command on the inspector's host."""
        if self.owner_id != user.pk and not user.is_superuser:
            raise PermissionDenied("Only the owner of this server can change it.")
        if self.transport == Transport.STDIO and not user.is_staff:
            raise PermissionDenied(STDIO_STAFF_ONLY if doing == "edit" else f"Only staff users can {doing} stdio servers.")

    def config(self):
        """The connection settings a worker's pool keys its warm connection on."""
        return ServerConfig(
            key=pool_key(self.pk),
            name=self.name,
            transport=self.transport,
            command=self.command,
            args=tuple(str(a) for a in self.args or ()),
            env=tuple(sorted((str(k), str(v)) for k, v in (self.env or {}).items())),
            cwd=self.cwd or None,
            url=self.real_url() or None,
            headers=tuple(sorted((str(k), str(v)) for k, v in (self.headers or {}).items())),
            connect_timeout=settings.MCP_CONNECT_TIMEOUT,
            call_timeout=settings.MCP_CALL_TIMEOUT,
            log_level=self.log_level or None,
        )

    def to_config_entry(self) -> dict[str, Any]:
        """This server in the common `mcpServers` JSON format (secrets included, the URL's too:
        callers mask them before anything leaves, see config_file.export_servers)."""
        if self.transport == Transport.STDIO:
            entry: dict[str, Any] = {"command": self.command, "args": list(self.args or [])}
            if self.env:
                entry["env"] = dict(self.env)
            if self.cwd:
                entry["cwd"] = self.cwd
        else:
            entry = {"url": self.real_url()}
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
    # Set by an app above tools (review: the tool changed since the server's approved version and
    # the server withholds changed tools); chat offers the model no tool with a reason here.
    withheld = models.CharField(
        max_length=300, blank=True, help_text="Why this tool is not offered to the model (empty: it is offered).",
    )

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

    @property
    def task_support(self) -> str:
        """The tool's `execution.taskSupport` (2025-11-25): "required", "optional" or "forbidden" (absent)."""
        value = ((self.definition or {}).get("execution") or {}).get("taskSupport")
        return value if value in ("required", "optional") else "forbidden"

    def task_mode(self, asked: bool) -> str:
        """How a call of this tool is sent: as a task when the tool requires one, or allows one
        and the caller `asked`; else plainly ("")."""
        support = self.task_support
        return "required" if support == "required" else "optional" if support == "optional" and asked else ""

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


class ToolCallQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ToolCallQuerySet":
        """Calls a user may read: theirs, their callers' (a conversation they own), and what a caller lets
        them read (a conversation shared with the team: tools/callers.py)."""
        if not user.is_authenticated:
            return self.none()
        if user.is_superuser:
            return self
        return self.filter(callers.visible_q(user))

    def acted_on_by(self, user) -> "ToolCallQuerySet":
        """Calls a user may act on (run in a view, cancel, answer for): theirs and their callers' (tools/callers.py)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(requested_by=user) | Q(owner=user))


class ToolCall(models.Model):
    class Origin(models.TextChoices):
        LLM = "llm", "LLM"
        MANUAL = "manual"
        WIDGET = "widget"
        REPLAY = "replay"
        VIEW = "view"  # a tool an App view registered, called by the model and run by the view in the browser
        LOAD = "load"  # a call of a load test (review/loadtest.py): grouped under its run, kept out of everyday lists

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        TIMED_OUT = "timed_out"
        CANCELLED = "cancelled"
        INPUT_REQUIRED = "input_required", "waiting for input (the server asked; the call rests)"

    FINAL = {Status.SUCCEEDED, Status.FAILED, Status.TIMED_OUT, Status.CANCELLED}
    # Not ended yet: a turn waits for these, Stop and Cancel end them.
    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.INPUT_REQUIRED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    # Who started it, opaque to tools (tools/callers.py): the caller's lookup key, the user whose
    # calls they are (a conversation's owner), and what tools needs from it (model, groups, refs).
    caller = models.CharField(max_length=100, blank=True, db_index=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    context = models.JSONField(default=dict, blank=True)
    origin = models.CharField(max_length=10, choices=Origin.choices, db_index=True)
    # A deleted server leaves its calls behind: conversations are rebuilt from their projections.
    server = models.ForeignKey(Server, null=True, on_delete=models.SET_NULL, related_name="tool_calls")
    server_name = models.CharField(max_length=200, blank=True, help_text="The server's name when the call was made.")
    tool_name = models.CharField(max_length=200, db_index=True)
    llm_tool_call_id = models.CharField(max_length=200, blank=True)
    arguments = models.JSONField(default=dict, blank=True)
    is_app = models.BooleanField("app tool", default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    queued_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    celery_task_id = models.CharField(max_length=100, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Deliveries that started this call.")
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="When its task was last sent again by the sweep.")
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays")
    # For a call an App view made (origin "widget"): the call whose view it was, so the view's
    # calls can be listed under its tool card.
    view_call = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="view_calls")
    # For origin "view": the chat page that runs it (a random id per page); the first page to
    # claim the call runs it, so two open tabs never run a view's tool twice.
    view_page = models.CharField(max_length=64, blank=True)
    progress = models.JSONField(
        null=True, blank=True, help_text="The server's last notifications/progress for this call: progress, total, message.",
    )
    # Deadlines (tools/runtime/deadlines.py): the timeout is fixed when the call is created (the caller's
    # override, else its server's default; blank: the worker's MCP_CALL_TIMEOUT); the deadline is set when a
    # worker claims it and pushed on by progress. Past it, another delivery or the sweep takes over.
    timeout_s = models.FloatField(
        "timeout (s)", null=True, blank=True,
        help_text="Seconds this call may wait for an answer (without progress): the caller's override, else its "
        "server's default; blank: MCP_CALL_TIMEOUT.",
    )
    deadline_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When the worker running it is presumed gone: started + connect + timeout + margin, pushed on by "
        "progress; while it waits for input, when nobody answering ends it.",
    )
    # Multi round-trip input (2026-07-28, tools/runtime/input_rounds.py): the round the call is in, the
    # server's opaque requestState to echo on the retry (never shown to the model), and one
    # summary per round (its request keys and kinds, the state's size, when).
    input_round = models.PositiveSmallIntegerField(default=0, help_text="How many input-required rounds the server asked.")
    input_state = models.TextField(blank=True, help_text="The latest requestState, echoed verbatim on the retry.")
    input_rounds = models.JSONField(default=list, blank=True, help_text="Per round: keys, kinds, state bytes, at.")
    # Tasks (2025-11-25, tools/runtime/task_calls.py): a call of a tool whose `execution.taskSupport` is
    # "required", or "optional" when the caller asked, is sent task-augmented; the worker follows
    # the task by id (a later worker resumes it) and its result is stored like any call's.
    task_mode = models.CharField(
        max_length=10, blank=True, choices=[("", "plain call"), ("required", "task (the tool requires one)"),
                                            ("optional", "task (asked for; the tool allows one)")],
        help_text="Whether this call is sent as a task (2025-11-25 servers only).",
    )
    task_id = models.CharField(max_length=200, blank=True, help_text="The server's task id, once it created the task.")
    task_status = models.CharField(max_length=20, blank=True, help_text="working, input_required, completed, failed, cancelled.")
    task_history = models.JSONField(default=list, blank=True, help_text="Each status the task reported: status, message, at.")

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

    def related_or_none(self, name: str) -> Any:
        """A one-to-one row of this call (`full_result`, `projection`, `model_context`), or None:
        a call that failed, runs, or never had a view has none."""
        try:
            return getattr(self, name)
        except ObjectDoesNotExist:
            return None


class OAuthGrant(models.Model):
    """One user's tokens for one OAuth-protected server (tools/runtime/oauth.py), encrypted at rest."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        EXPIRED = "expired", "expired (could not refresh)"
        REJECTED = "rejected", "rejected by the server"

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="oauth_grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oauth_grants")
    access_token = EncryptedTextField(default="")
    refresh_token = EncryptedTextField(blank=True, default="")
    token_type = models.CharField(max_length=40, default="Bearer")
    scope = models.CharField(max_length=1000, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    token_endpoint = models.URLField(max_length=1000)
    client_id = models.CharField(max_length=300)
    resource = models.CharField(max_length=1000, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    error = models.TextField(blank=True)
    # A 403 insufficient_scope named more scope: the next sign-in asks for it too (a step-up).
    needed_scope = models.CharField(max_length=1000, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["server", "user"], name="one_oauth_grant_per_user")]


class OAuthFlow(models.Model):
    """One sign-in: what was discovered, each step's HTTP exchange (secrets redacted), the outcome.
    The server page lists them so an author can see where a sign-in goes wrong."""

    class Status(models.TextChoices):
        WAITING = "waiting", "waiting for the user at the authorization server"
        SIGNED_IN = "signed_in", "signed in"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="oauth_flows")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oauth_flows")
    state = models.CharField(max_length=100, unique=True)
    code_verifier = EncryptedTextField(default="")
    redirect_uri = models.URLField(max_length=1000)
    authorization_url = models.TextField(blank=True)
    context = models.JSONField(default=dict, blank=True, help_text="Token endpoint, client id, resource, scope, issuer.")
    steps = models.JSONField(default=list, blank=True, help_text="Each step: name, request, response (secrets redacted).")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.WAITING)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]


class StoredJSONField(models.JSONField):
    """A JSONField without SQLite's `JSON_VALID` CHECK constraint.

    Every value is checked JSON before it is written (a worker's own serialisation, or a large
    result's bytes that msgspec checked, tools/mcp/wire_result.py). The constraint re-parsed a 40 MB
    result inside SQLite on every insert, and it refused the zeroblob a large result is written
    into piece by piece (tools/runtime/stored_result.py `create`)."""

    def db_check(self, connection):
        return None


class ToolResult(models.Model):
    """The full CallToolResult exactly as received: what browsers and widgets get."""

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="full_result", primary_key=True)
    raw = StoredJSONField(help_text="The JSON-RPC `result` as on the wire, unknown fields kept.")
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
        if isinstance(block, dict) and is_ui_resource(block):
            return block["resource"]
    return None


class ServerRequestQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ServerRequestQuerySet":
        """Requests of the tool calls the user may see (the people who can answer them)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(tool_call__in=ToolCall.objects.visible_to(user).values("pk"))


class ServerRequest(models.Model):
    """One thing a server asked of this client during a call: an elicitation, a sampling, its roots.

    One row per request, for both protocol generations. On a legacy connection the request arrives
    inside a live `tools/call` and the worker holding it waits (on Redis) for the answer; on a
    2026-07-28 connection (multi round-trip input) the call's result names the requests and the
    answer queues a retry (`protocol`, `round`, `input_key`). Either way the browser answers
    through the same API and the same cards (tools/runtime/server_requests/).
    """

    class Kind(models.TextChoices):
        ELICITATION = "elicitation"
        SAMPLING = "sampling"
        ROOTS = "roots"

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for the user"
        GENERATING = "generating", "sampling: the model is answering"
        GENERATED = "generated", "sampling: answer shown for approval"
        ANSWERED = "answered"
        REFUSED = "refused", "refused (invalid request, or the user rejected it)"
        CANCELLED = "cancelled"
        EXPIRED = "expired", "expired (the call's time ran out)"

    OPEN = (Status.PENDING, Status.GENERATING, Status.GENERATED)

    class Protocol(models.TextChoices):
        LEGACY = "legacy", "server-to-client request (a worker waits)"
        INPUT_REQUIRED = "input_required", "multi round-trip input (2026-07-28; the call rests)"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tool_call = models.ForeignKey(ToolCall, null=True, blank=True, on_delete=models.CASCADE, related_name="server_requests")
    server = models.ForeignKey(Server, null=True, on_delete=models.SET_NULL, related_name="server_requests")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    method = models.CharField(max_length=60, help_text="The JSON-RPC method, e.g. elicitation/create.")
    mode = models.CharField(max_length=10, blank=True, help_text="Elicitation: form or url.")
    protocol = models.CharField(max_length=16, choices=Protocol.choices, default=Protocol.LEGACY)
    rpc_id = models.CharField(max_length=100, blank=True, help_text="The server's JSON-RPC id of the request (legacy).")
    round = models.PositiveSmallIntegerField(default=0, help_text="Multi round-trip input: which round asked it.")
    input_key = models.CharField(max_length=200, blank=True, help_text="Multi round-trip input: its key in inputRequests.")
    params = models.JSONField(default=dict, help_text="The request's params as the server sent them.")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING, db_index=True)
    action = models.CharField(max_length=10, blank=True, help_text="Elicitation: accept, decline or cancel.")
    answer = models.JSONField(null=True, blank=True, help_text="What the user submitted (form content, approved messages, model).")
    response = models.JSONField(null=True, blank=True, help_text="What went back to the server: a result, or an error.")
    error = models.TextField(blank=True)
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="When the waiting call gives up.")
    answered_at = models.DateTimeField(null=True, blank=True)

    objects = ServerRequestQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.method} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN


class ServerLogMessage(models.Model):
    """A `notifications/message` from a server, kept with the call it arrived during (if any)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="log_messages")
    tool_call = models.ForeignKey(ToolCall, null=True, blank=True, on_delete=models.CASCADE, related_name="log_messages")
    level = models.CharField(max_length=10, choices=LogLevel.choices)
    logger = models.CharField(max_length=200, blank=True)
    data = models.JSONField(null=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]


class ResourceSubscription(models.Model):
    """A user's Subscribe on a resource page: the connections workers hold to the server subscribe
    to every URI someone wants (tools/runtime/remote.py), with `resources/subscribe` (2025-11-25) or
    `subscriptions/listen` (2026-07-28), and each `notifications/resources/updated` reaches the
    server's pages (events.server_group)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="resource_subscriptions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="resource_subscriptions")
    uri = models.CharField(max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["uri"]
        constraints = [models.UniqueConstraint(fields=["server", "user", "uri"], name="one_subscription_per_user_and_uri")]

    def __str__(self) -> str:
        return self.uri
