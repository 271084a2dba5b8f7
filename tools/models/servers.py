"""Servers and what they offer: the registry row (settings, secrets, who may see it), its cached tools and views, OAuth sign-ins, resource subscriptions."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import Q

from inspector.encrypted import EncryptedJSONField, EncryptedTextField
from tools.mcp import url_secrets
from tools.mcp.config import ServerConfig

STDIO_STAFF_ONLY = (
    "Only staff users can create or edit stdio servers: a stdio server runs a command on the "
    "inspector's host. Ask an admin, or register the server over Streamable HTTP or SSE."
)

# The OAuth grants whose token the server's own client gets, no one signing in in a browser: each
# user's token is got again when it expires (tools/runtime/oauth.py).
NO_SIGN_IN_GRANTS = ("client_credentials", "token_exchange", "jwt_bearer")


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
                 ("client_credentials", "client credentials (machine to machine, no sign-in)"),
                 ("token_exchange", "enterprise-managed: ID token → ID-JAG → token (SEP-990, no sign-in)"),
                 ("jwt_bearer", "JWT bearer: a workload's own JWT (workload identity, RFC 7523, no sign-in)")],
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
    # The assertion grants (tools/mcp/token_exchange.py): a JWT someone else issued, presented with the
    # RFC 7523 jwt-bearer grant; enterprise-managed first exchanges it at the identity provider (RFC 8693).
    oauth_assertion = EncryptedTextField(
        "OAuth assertion (JWT)", blank=True, default="",
        help_text="Enterprise-managed: the ID token from the identity provider; JWT bearer: the workload's JWT (encrypted).",
    )
    oauth_assertion_file = models.CharField(
        "OAuth assertion file", max_length=500, blank=True,
        help_text="JWT bearer: a file the workload's JWT is read from at each token request (a projected token), "
        "instead of the assertion; only under the directory INSPECTOR_WORKLOAD_TOKEN_DIR names.",
    )
    oauth_idp_token_endpoint = models.URLField(
        "identity provider token endpoint", max_length=1000, blank=True,
        help_text="Enterprise-managed: where the ID token is exchanged for an ID-JAG (RFC 8693).",
    )
    oauth_idp_client_id = models.CharField("identity provider client id", max_length=300, blank=True,
                                           help_text="Enterprise-managed: this client's id at the identity provider.")
    oauth_idp_client_secret = EncryptedTextField("identity provider client secret", blank=True, default="",
                                                 help_text="Enterprise-managed: its secret there, if it has one (encrypted).")
    # DPoP-bound tokens (RFC 9449, tools/mcp/dpop.py): the token is asked for bound to a key only this
    # server's connections hold, and every request proves it holds the key. The key is generated on
    # first use (tools/runtime/oauth.py), encrypted, never shown, exported or sent anywhere but in proofs' public JWK.
    oauth_dpop = models.BooleanField(
        "DPoP-bound tokens", default=False,
        help_text="Ask for tokens bound to a key of this server's (DPoP, RFC 9449) and send a proof of it with every "
        "request; for authorization servers that support or require DPoP.",
    )
    oauth_dpop_key = EncryptedTextField("DPoP private key", blank=True, default="",
                                        help_text="EC P-256, generated on first use (encrypted, never shown).")

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
        if update_fields is None and self.oauth_dpop and not self.oauth_dpop_key and self.pk and not self._state.adding:
            # The DPoP key a worker made since this instance was read (tools/runtime/oauth.py) stays: a
            # full save from the settings page must not wipe it, or every bound token would be orphaned.
            self.oauth_dpop_key = Server.objects.filter(pk=self.pk).values_list("oauth_dpop_key", flat=True).first() or ""
        if update_fields is None or "url" in update_fields:
            self.url, self.url_secrets = url_secrets.resolve(self.url or "", self.url_secrets)
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "url_secrets"}
        super().save(*args, **kwargs)

    @property
    def signs_in(self) -> bool:
        """True if each user signs in in a browser (the authorization code), False if the server's
        client gets the tokens itself (NO_SIGN_IN_GRANTS)."""
        return self.oauth_grant not in NO_SIGN_IN_GRANTS

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
