"""A small real HTTP auth server for nsqd's --auth-http-address, in a thread.

``grants`` maps a secret to the JSON answer (or an int: that HTTP status);
``requests`` records what nsqd sent."""

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class AuthServer:
    def __init__(self, tls_context=None, redirect_to_https_port: int | None = None):
        """``tls_context``: serve HTTPS. ``redirect_to_https_port``: answer every
        request 403 naming that HTTPS port, as an nsqd that requires TLS does."""
        self.grants: dict = {}
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, params: dict) -> None:
                if redirect_to_https_port is not None:
                    body = json.dumps({"message": "TLS_REQUIRED", "https_port": redirect_to_https_port}).encode()
                    self.send_response(403)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                server.requests.append({"method": self.command, "path": self.path.split("?")[0], **params})
                grant = server.grants.get(params.get("secret"), 403)
                if isinstance(grant, int):
                    self.send_response(grant)
                    self.end_headers()
                    return
                body = json.dumps(grant).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                query = urllib.parse.urlsplit(self.path).query
                self.answer(dict(urllib.parse.parse_qsl(query, keep_blank_values=True)))

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self.answer({key: values[0] for key, values in body.items()})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls_context is not None:
            self.httpd.socket = tls_context.wrap_socket(self.httpd.socket, server_side=True)
        self.address = f"127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def grant(topic: str = ".*", channels=(".*",), permissions=("subscribe", "publish"), ttl: int = 3600,
          identity: str = "tester") -> dict:
    return {"ttl": ttl, "identity": identity, "identity_url": f"https://example.invalid/{identity}",
            "authorizations": [{"topic": topic, "channels": list(channels), "permissions": list(permissions)}]}
