"""The app's OAuth Client ID Metadata Document (CIMD: draft-ietf-oauth-client-id-metadata-document,
the MCP authorization spec's preferred client registration since 2025-11-25).

Instead of registering itself dynamically at each authorization server, the inspector names
itself by a URL: `PUBLIC_URL/oauth/client-metadata.json`, a public JSON document (metadata, no
secret) that says who the client is and where it may be sent back. An authorization server that
advertises `client_id_metadata_document_supported` fetches it and takes that URL as the
`client_id`. As in the `mcp` SDK's client, the URL is only used when it is an https URL with a
path (`is_valid_client_metadata_url`); with a plain-http `PUBLIC_URL` the inspector registers
dynamically as before.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse

from mcp.client.auth.utils import is_valid_client_metadata_url
from tools.mcp.oauth_flow import CLIENT_NAME


def document_url() -> str:
    """Where the document is served (whether or not it can be used as a client id)."""
    return settings.PUBLIC_URL + reverse("oauth_client_metadata")


def redirect_uri() -> str:
    """The one redirect URI the document allows: the sign-in callback under PUBLIC_URL."""
    return settings.PUBLIC_URL + reverse("oauth_callback")


def metadata_url() -> str:
    """The document's URL as this client's id, or "" when the SDK's rule refuses it (not https)."""
    url = document_url()
    return url if is_valid_client_metadata_url(url) else ""


def document() -> dict[str, Any]:
    """The document: a public client (no secret; PKCE), authorization code and refresh grants."""
    return {
        "client_id": document_url(),
        "client_name": CLIENT_NAME,
        "client_uri": settings.PUBLIC_URL + "/",
        "redirect_uris": [redirect_uri()],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
    }
