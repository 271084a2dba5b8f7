"""Validation of server settings, shared by the pages and the JSON API.

Secrets (env values, header values, the URL's password and secret query values) are never
sent back in clear: they are shown as MASK, and a submitted MASK means "keep the stored value"
(for the URL, Server.save() applies the rule; see tools/mcp/url_secrets.py).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.core.exceptions import PermissionDenied

from tools.mcp.oauth_flow import OAuthError
from tools.mcp.url_secrets import MASK
from tools.models import STDIO_STAFF_ONLY, Policy, Server, Transport
from tools.runtime.assertion_grants import allowed_token_file
from tools.runtime.deadlines import TimeoutOutOfRange, check_timeout, max_timeout


def masked(secrets: dict | None) -> dict[str, str]:
    return {k: MASK for k in (secrets or {})}


def _string_dict(value: Any, label: str) -> dict[str, str]:
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"{label} must be a JSON object: {exc.msg} at line {exc.lineno} column {exc.colno}.")
    if not isinstance(value, dict):
        raise forms.ValidationError(f"{label} must be a JSON object of names to strings, e.g. {{\"TOKEN\": \"…\"}}.")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k.strip():
            raise forms.ValidationError(f"{label}: names must be non-empty strings.")
        if not isinstance(v, (str, int, float, bool)):
            raise forms.ValidationError(f"{label}: the value of {k!r} must be a string.")
        out[k] = str(v)
    return out


def _json_list(value: Any, expected: str) -> Any:
    """A form field holding a JSON array: the parsed value (a list from the JSON API passes through)."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"{expected}: {exc.msg}.")
    return value


def _string_list(value: Any) -> list[str]:
    value = _json_list(value, "Arguments must be a JSON array of strings")
    if not isinstance(value, list) or not all(isinstance(a, (str, int, float)) for a in value):
        raise forms.ValidationError('Arguments must be a JSON array of strings, e.g. ["server.py", "--verbose"].')
    return [str(a) for a in value]


def roots_list(value: Any) -> list[dict[str, str]]:
    """Roots as the protocol sends them: [{"uri": "file:///…", "name"?: "…"}] (file:// URIs only)."""
    value = _json_list(value, "Roots must be a JSON array")
    if not isinstance(value, list):
        raise forms.ValidationError('Roots must be a JSON array, e.g. ["file:///home/me/project"].')
    roots = []
    for item in value:
        root = {"uri": item} if isinstance(item, str) else item
        if not isinstance(root, dict) or not isinstance(root.get("uri"), str):
            raise forms.ValidationError('Each root is a file:// URI or {"uri": "file:///…", "name": "…"}.')
        if not root["uri"].startswith("file://"):
            raise forms.ValidationError(f"Root {root['uri']!r} is not a file:// URI (the protocol allows only those).")
        entry = {"uri": root["uri"]}
        if isinstance(root.get("name"), str) and root["name"]:
            entry["name"] = root["name"]
        roots.append(entry)
    return roots


class ServerForm(forms.ModelForm):
    args = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text='JSON array, e.g. ["server.py"]')
    env = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), help_text="JSON object; values are encrypted and shown masked.")
    headers = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), help_text='JSON object, e.g. {"Authorization": "Bearer …"}; values are encrypted and shown masked.')
    roots = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}),
        help_text='Answered to the server\'s roots/list: a JSON array of file:// URIs, or of {"uri": "file:///…", "name": "…"}.',
    )

    class Meta:
        model = Server
        fields = ["name", "transport", "command", "args", "env", "cwd", "url", "headers", "auth", "oauth_client_id",
                  "oauth_client_secret", "oauth_scope", "oauth_grant", "oauth_client_auth", "oauth_private_key",
                  "oauth_assertion", "oauth_assertion_file", "oauth_idp_token_endpoint", "oauth_idp_client_id",
                  "oauth_idp_client_secret", "oauth_dpop", "shared", "enabled", "projection_policy", "roots", "log_level",
                  "call_timeout"]
        widgets = {"oauth_client_secret": forms.PasswordInput(render_value=True),
                   "oauth_private_key": forms.Textarea(attrs={"rows": 3}),
                   "oauth_assertion": forms.Textarea(attrs={"rows": 3}),
                   "oauth_idp_client_secret": forms.PasswordInput(render_value=True)}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        instance = self.instance
        if not self.is_bound:
            self.initial["args"] = json.dumps(instance.args or [])
            self.initial["env"] = json.dumps(masked(instance.env), indent=1) if instance.env else ""
            self.initial["headers"] = json.dumps(masked(instance.headers), indent=1) if instance.headers else ""
            self.initial["roots"] = json.dumps(instance.roots) if instance.roots else ""
        timeout = self.fields["call_timeout"]
        timeout.help_text = (f"Seconds a tool call may wait for an answer; progress notifications give it that long again, "
                             f"up to {max_timeout():g} s in all. Blank: {settings.MCP_CALL_TIMEOUT:g} s.")
        timeout.widget.attrs.update(min=1, max=int(max_timeout()), placeholder=f"{settings.MCP_CALL_TIMEOUT:g}")
        self._stored_env = dict(instance.env or {}) if instance.pk else {}
        self._stored_headers = dict(instance.headers or {}) if instance.pk else {}
        self._stored_client_secret = instance.oauth_client_secret if instance.pk else ""
        self._stored_private_key = instance.oauth_private_key if instance.pk else ""
        self._stored_assertion = instance.oauth_assertion if instance.pk else ""
        self._stored_idp_secret = instance.oauth_idp_client_secret if instance.pk else ""
        self.fields["auth"].required = False  # absent (an import, an older API client): none
        self.fields["oauth_grant"].required = False  # absent: the authorization code
        if not self.is_bound and instance.oauth_private_key:
            self.initial["oauth_private_key"] = MASK
        if not self.is_bound and instance.oauth_client_secret:
            self.initial["oauth_client_secret"] = MASK
        if not self.is_bound and instance.oauth_assertion:
            self.initial["oauth_assertion"] = MASK
        if not self.is_bound and instance.oauth_idp_client_secret:
            self.initial["oauth_idp_client_secret"] = MASK
        self._was_stdio = bool(instance.pk) and instance.transport == Transport.STDIO
        if not (user and user.is_staff) and not self._was_stdio:
            # Offer only what this user may save; the API still answers a stdio attempt with a 403.
            self.fields["transport"].choices = [c for c in self.fields["transport"].choices if c[0] != Transport.STDIO]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("A name is required.")
        return name

    def clean_args(self) -> list[str]:
        return _string_list(self.cleaned_data.get("args"))

    def clean_call_timeout(self) -> int | None:
        value = self.cleaned_data.get("call_timeout")
        if value is not None:
            try:
                check_timeout(value)
            except TimeoutOutOfRange as exc:
                raise forms.ValidationError(str(exc)) from None
        return value

    def clean_roots(self) -> list[dict[str, str]]:
        return roots_list(self.cleaned_data.get("roots"))

    def clean_env(self) -> dict[str, str]:
        env = _string_dict(self.cleaned_data.get("env"), "Environment")
        return {k: (self._stored_env.get(k, "") if v == MASK else v) for k, v in env.items()}

    def clean_headers(self) -> dict[str, str]:
        headers = _string_dict(self.cleaned_data.get("headers"), "Headers")
        return {k: (self._stored_headers.get(k, "") if v == MASK else v) for k, v in headers.items()}

    def clean_auth(self) -> str:
        return self.cleaned_data.get("auth") or "none"

    def clean_oauth_client_secret(self) -> str:
        value = self.cleaned_data.get("oauth_client_secret") or ""
        return self._stored_client_secret if value == MASK else value

    def clean_oauth_private_key(self) -> str:
        value = (self.cleaned_data.get("oauth_private_key") or "").strip()
        return self._stored_private_key if value == MASK else value

    def clean_oauth_assertion(self) -> str:
        value = (self.cleaned_data.get("oauth_assertion") or "").strip()
        return self._stored_assertion if value == MASK else value

    def clean_oauth_idp_client_secret(self) -> str:
        value = self.cleaned_data.get("oauth_idp_client_secret") or ""
        return self._stored_idp_secret if value == MASK else value

    def clean_oauth_assertion_file(self) -> str:
        path = (self.cleaned_data.get("oauth_assertion_file") or "").strip()
        if path and not (self.user and self.user.is_staff):
            # The worker posts the file's JWT (the deployment's own identity) to the token endpoint the
            # server's metadata names: a URL any user could choose (tools/runtime/assertion_grants.py).
            raise forms.ValidationError("Only staff may have a server present an assertion file from the inspector's machine: "
                                        "paste the JWT into the assertion setting instead.")
        if path:
            try:
                allowed_token_file(path)
            except OAuthError as exc:
                raise forms.ValidationError(str(exc)) from None
        return path

    def clean_oauth_grant(self) -> str:
        return self.cleaned_data.get("oauth_grant") or "authorization_code"

    def clean(self):
        data = super().clean()
        transport = data.get("transport")
        if data.get("auth") == "oauth" and transport == Transport.STDIO:
            self.add_error("auth", "OAuth is for HTTP and SSE servers; a stdio server takes its credentials in its environment.")
        if data.get("auth") == "oauth" and data.get("oauth_grant") == "client_credentials":
            method = data.get("oauth_client_auth") or ""
            if not data.get("oauth_client_id"):
                self.add_error("oauth_client_id", "The client credentials grant needs the client id registered for this server.")
            elif method == "private_key_jwt" and not data.get("oauth_private_key"):
                self.add_error("oauth_private_key", "private_key_jwt needs the client's private key (PEM).")
            elif method.startswith("client_secret") and not data.get("oauth_client_secret"):
                self.add_error("oauth_client_secret", f"{method} needs the client's secret.")
            elif not (data.get("oauth_client_secret") or data.get("oauth_private_key")):
                self.add_error("oauth_client_secret", "The client credentials grant needs the client's secret or private key.")
        if data.get("auth") == "oauth" and data.get("oauth_grant") in ("token_exchange", "jwt_bearer"):
            self._check_assertion_grant(data)
        if data.get("auth") == "oauth" and data.get("oauth_grant") == "token_exchange" and data.get("shared"):
            self.add_error("shared", "Enterprise-managed authorization presents the owner's ID token: a server that uses it "
                           "cannot be shared, or everyone would act as you. Each user registers it with their own ID token.")
        # The raw value too: for non-staff users "stdio" is not even a valid choice.
        if transport == Transport.STDIO or self.data.get("transport") == Transport.STDIO or self._was_stdio:
            if not (self.user and self.user.is_staff):
                raise PermissionDenied(STDIO_STAFF_ONLY)
        if transport == Transport.STDIO:
            if not (data.get("command") or "").strip():
                self.add_error("command", "A stdio server needs a command to run, e.g. python or npx.")
        elif transport in (Transport.STREAMABLE_HTTP, Transport.SSE):
            url = (data.get("url") or "").strip()
            if not url:
                self.add_error("url", "An HTTP or SSE server needs a URL.")
            elif urlsplit(url).scheme not in ("http", "https"):
                self.add_error("url", "Only http:// and https:// URLs are allowed.")
        return data

    def _check_assertion_grant(self, data: dict[str, Any]) -> None:
        """What enterprise-managed authorization and the JWT bearer grant need (tools/mcp/token_exchange.py)."""
        if not data.get("oauth_client_id"):
            self.add_error("oauth_client_id", "This grant needs the client id registered at the server's authorization server.")
        if data.get("oauth_client_auth") == "private_key_jwt":
            self.add_error("oauth_client_auth", "With an assertion grant the client authenticates with its secret "
                           "(client_secret_basic or client_secret_post), or not at all.")
        if data.get("oauth_grant") == "token_exchange":
            if not data.get("oauth_idp_token_endpoint"):
                self.add_error("oauth_idp_token_endpoint", "Enterprise-managed authorization needs the identity provider's "
                               "token endpoint (where the ID token is exchanged for an ID-JAG).")
            if not data.get("oauth_assertion"):
                self.add_error("oauth_assertion", "Enterprise-managed authorization needs the ID token from the identity provider.")
        elif not (data.get("oauth_assertion") or data.get("oauth_assertion_file") or self.has_error("oauth_assertion_file")):
            self.add_error("oauth_assertion", "The JWT bearer grant needs the workload's JWT, or the file it is read from.")


def form_data_from_json(payload: dict, instance: Server | None = None) -> dict[str, Any]:
    """Turn an API body into form data; on PATCH, missing fields keep their stored values."""
    fields = ServerForm.Meta.fields
    unknown = sorted(set(payload) - set(fields))
    if unknown:
        raise forms.ValidationError(f"Unknown field(s): {', '.join(unknown)}. Allowed: {', '.join(fields)}.")
    data: dict[str, Any] = {}
    if instance is not None:
        data.update(
            name=instance.name, transport=instance.transport, command=instance.command, args=instance.args,
            env=masked(instance.env), cwd=instance.cwd, url=instance.masked_url, headers=masked(instance.headers),
            shared=instance.shared, enabled=instance.enabled, projection_policy=instance.projection_policy,
            roots=instance.roots, log_level=instance.log_level, call_timeout=instance.call_timeout,
            auth=instance.auth, oauth_client_id=instance.oauth_client_id, oauth_scope=instance.oauth_scope,
            oauth_client_secret=MASK if instance.oauth_client_secret else "", oauth_grant=instance.oauth_grant,
            oauth_client_auth=instance.oauth_client_auth, oauth_private_key=MASK if instance.oauth_private_key else "",
            oauth_assertion=MASK if instance.oauth_assertion else "", oauth_assertion_file=instance.oauth_assertion_file,
            oauth_idp_token_endpoint=instance.oauth_idp_token_endpoint, oauth_idp_client_id=instance.oauth_idp_client_id,
            oauth_idp_client_secret=MASK if instance.oauth_idp_client_secret else "",
            oauth_dpop=instance.oauth_dpop,
        )
    else:
        data.update(enabled=True, projection_policy=Policy.CONTENT_FIRST, auth="none")
    data.update(payload)
    for key in ("args", "env", "headers", "roots"):
        if not isinstance(data.get(key), str):
            data[key] = json.dumps(data.get(key) if data.get(key) is not None else ({} if key not in ("args", "roots") else []))
    # Checkboxes: a form treats a missing key as False.
    for key in ("shared", "enabled", "oauth_dpop"):
        if not data.get(key):
            data.pop(key, None)
    return data
