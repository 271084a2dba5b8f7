"""Secrets inside a server URL: the password of `user:password@`, and secret-looking query values.

A server URL like ``https://user:p@host/mcp?token=abc&v=2`` carries credentials just like an
``Authorization`` header does, so it gets the same treatment as the server's headers and env:
the ``url`` column keeps only the *masked* URL (``https://user:********@host/mcp?token=********&v=2``),
the secret parts go to an encrypted field, and the connection alone rebuilds the real URL.

What counts as secret (names compared case-insensitively):
- the userinfo password; a userinfo without a password (``https://TOKEN@host``) is a secret
  as a whole, since a bare token there is common;
- a query parameter named in ``SECRET_QUERY_NAMES``, or whose name ends in one of
  ``SECRET_QUERY_SUFFIXES`` (``x_api_key``, ``github-token``, ``oauth.secret`` ...).

Editing follows the "mask = keep" rule of headers and env: a MASK where a secret was keeps
the stored value (matched by parameter name and position, so the host, the path and other
parameters can change around it); a typed value replaces it; leaving it out removes it.
The raw text of every value is kept as typed (no decoding), so the real URL is rebuilt exactly.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "********"

SECRET_QUERY_NAMES = frozenset({
    "token", "access_token", "refresh_token", "id_token", "auth_token", "bearer", "jwt",
    "auth", "authorization", "credential", "credentials",
    "key", "api_key", "apikey", "api-key", "access_key", "private_key",
    "password", "passwd", "pwd", "pass", "secret", "client_secret",
    "sig", "signature", "code", "session", "sessionid", "session_id",
})
SECRET_QUERY_SUFFIXES = ("token", "_key", "-key", ".key", "apikey", "secret", "password", "signature")


class UrlSecretError(ValueError):
    """A submitted URL that cannot be resolved (e.g. a mask where nothing is stored)."""


def is_secret_name(name: str) -> bool:
    """Whether a query parameter's value is a secret (see the module docstring for the list)."""
    lowered = unquote(name).strip().lower()
    return lowered in SECRET_QUERY_NAMES or lowered.endswith(SECRET_QUERY_SUFFIXES)


def _is_mask(value: str) -> bool:
    return unquote(value) == MASK


def _parts(url: str) -> tuple[Any, str | None, str | None, str]:
    """(split url, username, password, host[:port]); username/password are None when absent."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. "http://[::1" (a bad IPv6 literal)
        raise UrlSecretError(f"This is not a valid URL: {exc}.") from exc
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at:
        return parts, None, None, parts.netloc
    user, colon, password = userinfo.partition(":")
    return parts, user, (password if colon else None), hostport


def _query_items(query: str) -> list[tuple[str, str | None]]:
    """Raw `name=value` pairs, order kept; value None for a bare `name`."""
    items: list[tuple[str, str | None]] = []
    for piece in query.split("&") if query else []:
        name, eq, value = piece.partition("=")
        items.append((name, value if eq else None))
    return items


def _query_text(items: list[tuple[str, str | None]]) -> str:
    return "&".join(name if value is None else f"{name}={value}" for name, value in items)


def resolve(url: str, stored: dict | None, strict: bool = True) -> tuple[str, dict[str, Any]]:
    """Split a submitted URL into (masked URL, secrets), taking masked parts from `stored`.

    `stored` is what the encrypted field holds: ``{"password": "...", "query": {name: [values]}}``,
    or ``"userinfo"`` instead of ``"password"`` for a userinfo without a password. A MASK
    where nothing is stored raises UrlSecretError when `strict`, else it stays a bare mask.
    """
    stored = stored or {}
    stored_query = {str(k).lower(): list(v) for k, v in (stored.get("query") or {}).items()}
    if not url:
        return url, {}
    parts, user, password, hostport = _parts(url)
    secrets: dict[str, Any] = {}

    netloc = parts.netloc  # "user:@host" or "@host": nothing secret to hide
    if password or (password is None and user):
        # A password, or a userinfo that is only a token: which one is part of the secret's key.
        kind, value = ("password", password) if password is not None else ("userinfo", user)
        if not _is_mask(value):
            secrets[kind] = value
        elif stored.get(kind):
            secrets[kind] = stored[kind]
        elif strict:
            label = "password" if kind == "password" else "user part"
            raise UrlSecretError(f"The URL has a masked {label} ({MASK}) but no {label} is stored: type it.")
        netloc = f"{user}:{MASK}@{hostport}" if kind == "password" else f"{MASK}@{hostport}"

    masked_items: list[tuple[str, str | None]] = []
    seen: dict[str, int] = {}
    for name, value in _query_items(parts.query):
        if value is None or value == "" or not is_secret_name(name):
            masked_items.append((name, value))
            continue
        key = unquote(name).lower()
        index = seen.get(key, 0)
        seen[key] = index + 1
        masked_items.append((name, MASK))
        if _is_mask(value):
            kept = stored_query.get(key, [])
            if index >= len(kept):
                if strict:
                    raise UrlSecretError(
                        f"The URL has a masked value for “{unquote(name)}” ({MASK}) but no such value is stored: type it."
                    )
                continue
            value = kept[index]
        secrets.setdefault("query", {}).setdefault(key, []).append(value)

    masked = urlunsplit((parts.scheme, netloc, parts.path, _query_text(masked_items), parts.fragment))
    return masked, secrets


def reveal(masked_url: str, secrets: dict | None) -> str:
    """The real URL: the masked URL with its secrets put back (for the connection only)."""
    if not masked_url or not secrets:
        return masked_url
    parts, user, password, hostport = _parts(masked_url)
    netloc = parts.netloc
    if password is not None and _is_mask(password) and secrets.get("password"):
        netloc = f"{user}:{secrets['password']}@{hostport}"
    elif password is None and user is not None and _is_mask(user) and secrets.get("userinfo"):
        netloc = f"{secrets['userinfo']}@{hostport}"
    query = {str(k).lower(): list(v) for k, v in (secrets.get("query") or {}).items()}
    seen: dict[str, int] = {}
    items = []
    for name, value in _query_items(parts.query):
        if value is not None and _is_mask(value) and is_secret_name(name):
            key = unquote(name).lower()
            index = seen.get(key, 0)
            seen[key] = index + 1
            if index < len(query.get(key, [])):
                value = query[key][index]
        items.append((name, value))
    return urlunsplit((parts.scheme, netloc, parts.path, _query_text(items), parts.fragment))


def mask(url: str) -> str:
    """A URL with its secret parts replaced by MASK, for display (nothing stored is needed)."""
    try:
        return resolve(url, None, strict=False)[0]
    except UrlSecretError:
        return "(not a valid URL)"


# --- free text: error messages may quote a URL with its credentials -----------------------------

_URL_IN_TEXT = re.compile(r"(?P<scheme>https?://)(?:[^/@\s]+@)?(?P<rest>[^\s?#]*)(?:\?[^\s#]*)?")


def redact(message: str) -> str:
    """Error text without URL credentials or query strings (tokens often travel there), and
    without NUL characters (a server's stderr may hold any bytes; PostgreSQL refuses NUL in text)."""
    return _URL_IN_TEXT.sub(lambda m: m["scheme"] + m["rest"], message).replace("\x00", "")
