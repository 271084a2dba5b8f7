"""Validation of server settings, shared by the pages and the JSON API.

Secrets (env values, header values) are never sent back in clear: they are shown as MASK,
and a submitted MASK means "keep the stored value".
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.core.exceptions import PermissionDenied

from tools.models import Policy, Server, Transport

MASK = "********"
STDIO_STAFF_ONLY = (
    "Only staff users can create or edit stdio servers: a stdio server runs a command on the "
    "inspector's host. Ask an admin, or register the server over Streamable HTTP or SSE."
)


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


def _string_list(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Arguments must be a JSON array of strings: {exc.msg}.")
    if not isinstance(value, list) or not all(isinstance(a, (str, int, float)) for a in value):
        raise forms.ValidationError('Arguments must be a JSON array of strings, e.g. ["server.py", "--verbose"].')
    return [str(a) for a in value]


class ServerForm(forms.ModelForm):
    args = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text='JSON array, e.g. ["server.py"]')
    env = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), help_text="JSON object; values are encrypted and shown masked.")
    headers = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), help_text='JSON object, e.g. {"Authorization": "Bearer …"}; values are encrypted and shown masked.')

    class Meta:
        model = Server
        fields = ["name", "transport", "command", "args", "env", "cwd", "url", "headers", "shared", "enabled", "projection_policy"]

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        instance = self.instance
        if not self.is_bound:
            self.initial["args"] = json.dumps(instance.args or [])
            self.initial["env"] = json.dumps(masked(instance.env), indent=1) if instance.env else ""
            self.initial["headers"] = json.dumps(masked(instance.headers), indent=1) if instance.headers else ""
        self._stored_env = dict(instance.env or {}) if instance.pk else {}
        self._stored_headers = dict(instance.headers or {}) if instance.pk else {}
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

    def clean_env(self) -> dict[str, str]:
        env = _string_dict(self.cleaned_data.get("env"), "Environment")
        return {k: (self._stored_env.get(k, "") if v == MASK else v) for k, v in env.items()}

    def clean_headers(self) -> dict[str, str]:
        headers = _string_dict(self.cleaned_data.get("headers"), "Headers")
        return {k: (self._stored_headers.get(k, "") if v == MASK else v) for k, v in headers.items()}

    def clean(self):
        data = super().clean()
        transport = data.get("transport")
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
            env=masked(instance.env), cwd=instance.cwd, url=instance.url, headers=masked(instance.headers),
            shared=instance.shared, enabled=instance.enabled, projection_policy=instance.projection_policy,
        )
    else:
        data.update(enabled=True, projection_policy=Policy.CONTENT_FIRST)
    data.update(payload)
    for key in ("args", "env", "headers"):
        if not isinstance(data.get(key), str):
            data[key] = json.dumps(data.get(key) if data.get(key) is not None else ({} if key != "args" else []))
    # Checkboxes: a form treats a missing key as False.
    for key in ("shared", "enabled"):
        if not data.get(key):
            data.pop(key, None)
    return data
