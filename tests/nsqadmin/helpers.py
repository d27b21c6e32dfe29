"""Helpers for nsqadmin's tests: a real cluster, nsqadmin as a subprocess,
JSON calls to it, and a small HTTP server receiving its notifications."""

import contextlib
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from nsqpy.localcluster import DaemonProcess, nsqd_process, nsqlookupd_process
from tests.support.wire import http, http_json, wait_until


class Cluster:
    """nsqlookupd plus nsqd processes registered with it."""

    def __init__(self, lookupd: DaemonProcess, nsqds: list[DaemonProcess]):
        self.lookupd = lookupd
        self.nsqds = nsqds

    def node(self, index: int) -> str:
        """nsqadmin's name for an nsqd: <broadcast_address>:<http_port>."""
        return self.nsqds[index].http_address

    def publish(self, index: int, topic: str, *bodies: bytes) -> None:
        url = f"{self.nsqds[index].http_url}/mpub?topic={topic}"
        status, _, answer = http("POST", url, b"\n".join(bodies))
        assert status == 200, answer

    def create_channel(self, index: int, topic: str, channel: str) -> None:
        """The topic too, if it does not exist yet."""
        assert http_json("POST", f"{self.nsqds[index].http_url}/topic/create?topic={topic}")[0] == 200
        url = f"{self.nsqds[index].http_url}/channel/create?topic={topic}&channel={urllib.parse.quote(channel)}"
        assert http_json("POST", url)[0] == 200

    def nsqd_topic(self, index: int, topic: str) -> dict | None:
        _, stats = http_json("GET", f"{self.nsqds[index].http_url}/stats?format=json&topic={topic}")
        return (stats["topics"] or [None])[0]

    def lookupd_topics(self) -> list[str]:
        return http_json("GET", f"{self.lookupd.http_url}/topics")[1]["topics"]

    def wait_registered(self, topic: str, producers: int) -> None:
        """Until nsqlookupd lists ``producers`` nsqd for ``topic``."""
        def registered():
            status, answer = http_json("GET", f"{self.lookupd.http_url}/lookup?topic={topic}")
            return status == 200 and len(answer["producers"]) == producers
        wait_until(registered, timeout=30)


def start_cluster(stack: contextlib.ExitStack, data_dir, nsqd_count: int = 2, *nsqd_args: str) -> Cluster:
    lookupd = stack.enter_context(nsqlookupd_process())
    nsqds = []
    for i in range(nsqd_count):
        path = data_dir / f"nsqd{i}"
        path.mkdir()
        nsqds.append(stack.enter_context(nsqd_process(
            str(path), f"--lookupd-tcp-address={lookupd.tcp_address}", *nsqd_args)))
    cluster = Cluster(lookupd, nsqds)
    wait_until(lambda: len(http_json("GET", f"{lookupd.http_url}/nodes")[1]["producers"]) == nsqd_count,
               timeout=30)
    return cluster


def nsqadmin_process(*args: str) -> DaemonProcess:
    return DaemonProcess("nsqadmin", ["--http-address=127.0.0.1:0", *args], ready=("HTTP",))


class NotificationSink:
    """A real HTTP server that records every JSON body POSTed to it."""

    def __init__(self):
        self.received: list[dict] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                sink.received.append({"content_type": self.headers["Content-Type"], **json.loads(body)})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/pub?topic=admin_actions"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def call(admin: DaemonProcess, method: str, path: str, body=None, headers: dict | None = None,
         timeout: float = 30.0) -> tuple[int, dict | None]:
    """One JSON API call to nsqadmin -> (status, decoded JSON or None)."""
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    request = urllib.request.Request(admin.http_url + path, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, {"text": raw.decode()}


def departed_rows(admin: DaemonProcess, headers: dict | None = None) -> list[dict]:
    """The departed nodes nsqadmin lists on ``/api/nodes``."""
    status, answer = call(admin, "GET", "/api/nodes", headers=headers)
    assert status == 200, answer
    return answer["departed"]


def wait_taken_over(admin: DaemonProcess, node: str, timeout: float = 60.0) -> dict:
    """nsqadmin's row of departed ``node`` (a replicated nsqd's TCP
    address) once the survivor that took it over adopted its messages."""
    return wait_until(lambda: next((row for row in departed_rows(admin) if row["node"] == node
                                    and row["taken_over_by"] and row["messages_adopted"]), None),
                      timeout=timeout, interval=0.3)
