"""A small enterprise identity provider for the SEP-990 tests: a real HTTP token endpoint on
loopback doing the RFC 8693 token exchange (ID token for an ID-JAG), in a thread of the test.

It signs ID tokens and ID-JAGs with one EC key (`public_pem` is what the MCP authorization server,
tests/mcp_servers/oauth_server.py `--assertion-key`, verifies ID-JAGs with). Each token request's
form is kept in `requests`, so a test sees exactly what the client sent. The ID token must verify
(aud = `client_id`, iss = this IdP), its type and the requested type be SEP-990's, and `audience`
and `resource` be there; else a 400 as RFC 8693 §2.2.2 says.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"


class IdentityProvider:
    """Start with `IdentityProvider(client_id, mcp_client_id)`; `stop()` when done."""

    def __init__(self, client_id: str, mcp_client_id: str) -> None:
        self.client_id, self.mcp_client_id = client_id, mcp_client_id
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.private_pem = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()).decode()
        self.public_pem = self.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                             serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        self.requests: list[dict[str, str]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                form = dict(parse_qsl(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()))
                provider.requests.append(form)
                status, answer = provider.exchange(form)
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.token_endpoint = f"{self.issuer}/token"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def id_token(self, subject: str, audience: str | None = None) -> str:
        """An ID token for `subject`, as the IdP would have issued it at the user's login."""
        now = int(time.time())
        return jwt.encode({"iss": self.issuer, "sub": subject, "aud": audience or self.client_id, "iat": now, "exp": now + 600},
                          self.private_pem, algorithm="ES256")

    def exchange(self, form: dict[str, str]) -> tuple[int, dict[str, str]]:
        if form.get("grant_type") != TOKEN_EXCHANGE:
            return 400, {"error": "unsupported_grant_type"}
        if form.get("subject_token_type") != ID_TOKEN or form.get("requested_token_type") != ID_JAG \
                or not form.get("audience") or not form.get("resource"):
            return 400, {"error": "invalid_request", "error_description": "not a SEP-990 token exchange"}
        try:
            claims = jwt.decode(form.get("subject_token", ""), self.public_pem, algorithms=["ES256"],
                                audience=self.client_id, issuer=self.issuer)
        except jwt.PyJWTError as exc:
            return 400, {"error": "invalid_grant", "error_description": f"ID token refused: {exc}"}
        now = int(time.time())
        id_jag = jwt.encode({"iss": self.issuer, "sub": claims["sub"], "aud": form["audience"], "resource": form["resource"],
                             "client_id": self.mcp_client_id, "iat": now, "exp": now + 300, "jti": str(uuid.uuid4())},
                            self.private_pem, algorithm="ES256", headers={"typ": "oauth-id-jag+jwt"})
        return 200, {"access_token": id_jag, "issued_token_type": ID_JAG, "token_type": "N_A"}

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
