"""A server's assertion grant settings as tools/mcp/token_exchange.py takes them (worker side).

Enterprise-managed authorization (`token_exchange`) presents the ID token kept, encrypted, in the
server's settings; the JWT bearer grant (`jwt_bearer`, workload identity) presents the workload's
JWT, kept there too or read from a file at each token request (a projected token is rotated on
disk). A file is read only under settings.WORKLOAD_TOKEN_DIR, and only for a staff member's server:
the files there are the deployment's own identity, and the worker posts the assertion to the token
endpoint the server's metadata names, so a user's server must not make it send them anywhere.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from tools.mcp.oauth_flow import OAuthError
from tools.mcp.token_exchange import AssertionClient
from tools.models import Server

MAX_ASSERTION_BYTES = 64 * 1024


def allowed_token_file(path: str) -> Path:
    """`path` resolved, if it lies under WORKLOAD_TOKEN_DIR; else an OAuthError saying why."""
    base = settings.WORKLOAD_TOKEN_DIR
    if not base:
        raise OAuthError("Reading the assertion from a file is off on this inspector (INSPECTOR_WORKLOAD_TOKEN_DIR is not set): "
                         "put the JWT in the server's assertion setting instead.")
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(Path(base).resolve()):
        raise OAuthError(f"The assertion file must be under {base} (INSPECTOR_WORKLOAD_TOKEN_DIR).")
    return resolved


def read_token_file(path: str) -> str:
    """The JWT in the workload's token file (read afresh each time: it is rotated)."""
    resolved = allowed_token_file(path)
    try:
        with resolved.open("rb") as fh:
            data = fh.read(MAX_ASSERTION_BYTES + 1)
    except OSError as exc:
        raise OAuthError(f"The assertion file {path} cannot be read ({exc.strerror or exc.__class__.__name__}).") from None
    if len(data) > MAX_ASSERTION_BYTES:
        raise OAuthError(f"The assertion file {path} is larger than {MAX_ASSERTION_BYTES // 1024} KiB: not a JWT.")
    return data.decode("utf-8", "replace").strip()


def assertion_client(server: Server) -> AssertionClient:
    """The server's client at its authorization server with the assertion it presents."""
    assertion = server.oauth_assertion or ""
    if server.oauth_grant == "jwt_bearer" and server.oauth_assertion_file:
        if not (server.owner_id and server.owner.is_staff):
            # The file is the deployment's own workload identity, sent to the URL the server's
            # metadata names: only a staff member's server may present it (the form says so too).
            raise OAuthError("Only a staff member's server may present the assertion file; "
                             "put the JWT in the server's assertion setting instead.")
        assertion = read_token_file(server.oauth_assertion_file)
    return AssertionClient(client_id=server.oauth_client_id, client_secret=server.oauth_client_secret or "",
                           auth_method=server.oauth_client_auth, scope=server.oauth_scope, assertion=assertion,
                           idp_token_endpoint=server.oauth_idp_token_endpoint, idp_client_id=server.oauth_idp_client_id,
                           idp_client_secret=server.oauth_idp_client_secret or "")
