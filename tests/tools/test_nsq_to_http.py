"""nsq_to_http against small real HTTP servers started by the test."""

import http.server
import threading
from urllib.parse import unquote_plus

import pytest

from tests.tools.helpers import channel_stats, eventually, publish

FAST_RETRY = ["--consumer-opt=default_requeue_delay,50ms", "--consumer-opt=backoff_multiplier,10ms",
              "--consumer-opt=max_backoff_duration,100ms"]


class Recorder(http.server.ThreadingHTTPServer):
    """Keeps every request; fails every ``fail_every``-th one with a 500."""

    def __init__(self, fail_every: int = 0):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fail_every = fail_every
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def delivered(self) -> list[bytes]:
        with self.lock:
            return [r["body"] for r in self.requests if r["status"] == 200]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self, body: bytes) -> None:
        server = self.server
        with server.lock:
            number = len(server.requests) + 1
            status = 500 if server.fail_every and number % server.fail_every == 0 else 200
            server.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                    "body": body, "status": status})
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        self._answer(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def do_GET(self):
        self._answer(unquote_plus(self.path.partition("data=")[2]).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    servers = []

    def start(fail_every: int = 0) -> Recorder:
        server = Recorder(fail_every)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def source(nsqd, topic):
    return [f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}"]


def test_post_with_headers_and_content_type(nsqd, topic, http_server, start_tool):
    server = http_server()
    bodies = [b"alpha", b"\x00binary\xff", b"{\"json\": true}"]
    publish(nsqd, topic, bodies)
    tool = start_tool("nsq_to_http", *source(nsqd, topic), f"--post={server.url}/in?x=1", "--content-type=text/plain",
                      "--header=X-Trace=abc", "--header", "Authorization=Bearer t", "-n", "1")
    eventually(lambda: len(server.delivered()) == 3)
    assert tool.stop() == 0
    assert server.delivered() == bodies
    request = server.requests[0]
    assert request["method"] == "POST" and request["path"] == "/in?x=1"
    assert request["headers"]["Content-Type"] == "text/plain"
    assert request["headers"]["X-Trace"] == "abc" and request["headers"]["Authorization"] == "Bearer t"
    assert request["headers"]["User-Agent"].startswith("nsq_to_http/1.3.0 nsqpy/")


def test_get_escapes_the_body_into_the_url(nsqd, topic, http_server, start_tool):
    server = http_server()
    bodies = [b"a b&c=d/e?f", "ünïcode +%".encode()]
    publish(nsqd, topic, bodies)
    tool = start_tool("nsq_to_http", *source(nsqd, topic), f"--get={server.url}/hit?data=%s")
    eventually(lambda: len(server.delivered()) == 2)
    assert tool.stop() == 0
    assert sorted(server.delivered()) == sorted(bodies)
    assert any(r["path"] == "/hit?data=a+b%26c%3Dd%2Fe%3Ff" for r in server.requests)


def test_a_server_failing_half_the_requests_loses_nothing(nsqd, topic, http_server, start_tool):
    server = http_server(fail_every=2)
    bodies = [b"event %d" % i for i in range(20)]
    publish(nsqd, topic, bodies)
    tool = start_tool("nsq_to_http", *source(nsqd, topic), f"--post={server.url}/", *FAST_RETRY)
    eventually(lambda: set(server.delivered()) == set(bodies), timeout=30)
    eventually(lambda: channel_stats(nsqd, topic, "nsq_to_http")["depth"] == 0 and
               channel_stats(nsqd, topic, "nsq_to_http")["in_flight_count"] == 0)
    assert tool.stop() == 0
    stats = channel_stats(nsqd, topic, "nsq_to_http")
    assert stats["requeue_count"] > 0
    assert b"got status code 500" in tool.stderr and b"Traceback" not in tool.stderr


def test_round_robin_sample_and_status(nsqd, topic, http_server, start_tool):
    servers = [http_server(), http_server()]
    publish(nsqd, topic, [b"m%d" % i for i in range(20)])
    tool = start_tool("nsq_to_http", *source(nsqd, topic), *(f"--post={s.url}/" for s in servers),
                      "--mode=round-robin", "--status-every=10", "-n", "1")
    eventually(lambda: sum(len(s.delivered()) for s in servers) == 20)
    assert tool.stop() == 0
    assert [len(s.delivered()) for s in servers] == [10, 10]
    assert tool.stderr.count(b"[aggregate]: finished 10 requests - 99th: ") == 2

    other = topic[:60] + "_s"
    publish(nsqd, other, [b"skipped"] * 5)
    tool = start_tool("nsq_to_http", f"--topic={other}", f"--nsqd-tcp-address={nsqd.tcp_address}",
                      f"--post={servers[0].url}/", "--sample=0")
    eventually(lambda: channel_stats(nsqd, other, "nsq_to_http").get("message_count") == 5 and
               channel_stats(nsqd, other, "nsq_to_http")["depth"] == 0 and
               channel_stats(nsqd, other, "nsq_to_http")["in_flight_count"] == 0)
    assert tool.stop() == 0
    assert len(servers[0].requests) == 10
