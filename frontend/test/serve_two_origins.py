"""Serve the widget host and its sandbox proxy on two origins, without Django.

    python frontend/test/serve_two_origins.py [--host-port 8765] [--sandbox-port 8766]

Host origin    http://127.0.0.1:<host-port>/     -> frontend/test/host.html
               http://127.0.0.1:<host-port>/static/... -> /work/main/static (like Django)
Sandbox origin http://127.0.0.1:<sandbox-port>/static/... -> the same static files; the
               proxy is /static/sandbox/proxy.html?host=http://127.0.0.1:<host-port>
Both also serve /data.json with `Access-Control-Allow-Origin: *`, the target of the
CSP tests (a sandboxed view has origin "null", so it needs CORS to read it).

The two ports are different origins for the browser, which is all the sandbox
needs. Importable: `start_servers(host_port, sandbox_port)` returns the two
servers, each running in a daemon thread.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import threading
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parent
STATIC_DIR = TEST_DIR.parent.parent / "static"


class _Handler(http.server.SimpleHTTPRequestHandler):
    # Set per server through functools.partial.
    serve_test_pages = False

    def __init__(self, *args, serve_test_pages: bool = False, **kwargs):
        self.serve_test_pages = serve_test_pages
        super().__init__(*args, directory=str(STATIC_DIR), **kwargs)

    def translate_path(self, path: str) -> str:
        clean = path.split("?", 1)[0].split("#", 1)[0]
        if clean == "/data.json":
            return str(TEST_DIR / "data.json")
        if clean.startswith("/static/"):
            return str(STATIC_DIR / clean[len("/static/"):].lstrip("/"))
        if self.serve_test_pages:
            if clean in ("/", ""):
                return str(TEST_DIR / "host.html")
            if clean.startswith("/test/"):
                return str(TEST_DIR / clean[len("/test/"):].lstrip("/"))
        return str(TEST_DIR / "__not_found__")

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        if self.path.split("?", 1)[0] == "/data.json":
            self.send_header("Access-Control-Allow-Origin", "*")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean


def _serve(port: int, serve_test_pages: bool) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(_Handler, serve_test_pages=serve_test_pages)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def start_servers(host_port: int = 0, sandbox_port: int = 0):
    """Start both servers (port 0 = any free port); returns (host_server, sandbox_server)."""
    return _serve(host_port, True), _serve(sandbox_port, False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-port", type=int, default=8765)
    parser.add_argument("--sandbox-port", type=int, default=8766)
    args = parser.parse_args()
    host, sandbox = start_servers(args.host_port, args.sandbox_port)
    hp, sp = host.server_address[1], sandbox.server_address[1]
    print(f"host page:     http://127.0.0.1:{hp}/?sandbox=http://127.0.0.1:{sp}")
    print(f"sandbox proxy: http://127.0.0.1:{sp}/static/sandbox/proxy.html?host=http://127.0.0.1:{hp}")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
