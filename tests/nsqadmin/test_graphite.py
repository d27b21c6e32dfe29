"""With --graphite-url, nsqadmin shows Graphite's rates as Go's does, and
with --proxy-graphite serves Graphite's /render itself. A small real HTTP
server stands in for Graphite."""

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.nsqadmin.helpers import call


class FakeGraphite:
    """Answers /render with one datapoint (``value``) and records each query."""

    def __init__(self, value):
        self.value = value
        self.queries: list[dict] = []
        graphite = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                graphite.queries.append({"path": url.path, "auth": self.headers.get("Authorization"),
                                         **dict(urllib.parse.parse_qsl(url.query))})
                body = json.dumps([{"target": "x", "datapoints": [[graphite.value, 1700000000]]}]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def graphite():
    server = FakeGraphite(value=600.0)
    try:
        yield server
    finally:
        server.stop()


def test_rate_is_graphite_counter_over_the_statsd_interval(cluster, start_admin, graphite, topic):
    admin = start_admin(f"--lookupd-http-address={cluster.lookupd.http_address}",
                        f"--graphite-url=http://{graphite.address}", "--statsd-interval=30s")
    target = f"sumSeries(stats.counters.nsq.*.topic.{topic}.message_count.count)"
    status, answer = call(admin, "GET", "/api/graphite?metric=rate&target=" + urllib.parse.quote(target))
    assert (status, answer) == (200, {"rate": "20.00"})
    query = graphite.queries[-1]
    assert (query["path"], query["target"], query["format"]) == ("/render", target, "json")
    assert (query["from"], query["until"]) == ("-60sec", "-30sec")

    cluster.publish(0, topic, b"x")
    cluster.wait_registered(topic, 1)
    status, page = call(admin, "GET", f"/topics/{topic}")
    assert status == 200 and urllib.parse.quote(target) in page["text"].replace("&amp;", "&")

    graphite.value = None
    assert call(admin, "GET", "/api/graphite?metric=rate&target=x")[1] == {"rate": "N/A"}


def test_render_proxy_passes_the_query_and_credentials(cluster, start_admin, graphite):
    admin = start_admin(f"--lookupd-http-address={cluster.lookupd.http_address}",
                        f"--graphite-url=http://user:pw@{graphite.address}", "--proxy-graphite")
    status, answer = call(admin, "GET", "/render?target=a.b&format=json")
    assert status == 200 and answer[0]["datapoints"] == [[600.0, 1700000000]]
    query = graphite.queries[-1]
    assert query["target"] == "a.b" and query["auth"] == "Basic dXNlcjpwdw=="


def test_without_graphite_there_is_no_render_route(admin):
    assert call(admin, "GET", "/render?target=a")[0] == 404
    assert call(admin, "GET", "/api/graphite?metric=rate&target=a") == (200, {"rate": "N/A"})
