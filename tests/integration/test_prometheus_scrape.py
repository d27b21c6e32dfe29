"""A real Prometheus (Debian's ``prometheus`` package) scrapes a test nsqd
and answers a PromQL query with the channel depth the test produced."""

import json
import re
import shutil
import socket
import urllib.parse
from pathlib import Path

import pytest

from tests.support.processes import GroupProcess
from nsqpy.protocol import commands as cmd
from tests.support.wire import WireConn, http, wait_until

PROMETHEUS = shutil.which("prometheus")


def _free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def prometheus(tmp_path):
    """-> start(target): Prometheus on loopback scraping ``target`` every
    second; -> its base URL. Stopped at teardown, even on failure."""
    if PROMETHEUS is None:  # make test installs it; a missing one is a broken setup, not a reason to pass
        pytest.fail("prometheus is not installed: run make test, or apt-get install -y prometheus")
    started = []

    def start(target: str) -> str:
        config = tmp_path / "prometheus.yml"
        config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "nsqd", "static_configs": [{"targets": [target]}]}],
        }))
        address = f"127.0.0.1:{_free_loopback_port()}"
        process = GroupProcess([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                f"--web.listen-address={address}"])
        started.append(process)
        process.wait_for("Server is ready to receive web requests", timeout=60)
        return f"http://{address}"

    yield start
    for process in started:
        process.stop()


def query(base_url: str, promql: str) -> list:
    status, _, body = http("GET", f"{base_url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")
    assert status == 200, body
    return json.loads(body)["data"]["result"]


def test_prometheus_reads_the_channel_depth(nsqd, prometheus, topic):
    url = nsqd.http_url
    assert http("POST", f"{url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{url}/channel/create?topic={topic}&channel=ch")[0] == 200
    for index in range(7):
        assert http("POST", f"{url}/pub?topic={topic}", f"m{index}".encode())[0] == 200
    base_url = prometheus(nsqd.http_address)

    promql = f'nsqd_channel_depth{{topic="{topic}",channel="ch"}}'
    [series] = wait_until(lambda: query(base_url, promql), timeout=60, interval=0.5)
    assert series["metric"]["job"] == "nsqd"
    assert series["metric"]["instance"] == nsqd.http_address
    assert float(series["value"][1]) == 7
    [up] = query(base_url, 'up{job="nsqd"}')
    assert float(up["value"][1]) == 1


DASHBOARD = Path(__file__).resolve().parents[2] / "contrib" / "grafana" / "nsqd-dashboard.json"


def test_the_grafana_dashboard_queries_what_nsqd_exposes(start_nsqd, prometheus, topic):
    """Every panel's PromQL parses, and names only series a scraped nsqd has
    (a finished message gives the latency quantiles a sample)."""
    nsqd = start_nsqd("--e2e-processing-latency-percentile=0.99")
    with WireConn(nsqd.tcp_hostport) as consumer:
        consumer.identify()
        consumer.subscribe(topic, "ch", rdy=1)
        assert http("POST", f"{nsqd.http_url}/pub?topic={topic}", b"one")[0] == 200
        consumer.send(cmd.fin(consumer.message().id))
        wait_until(lambda: b"nsqd_channel_e2e_processing_latency_seconds{" in
                   http("GET", f"{nsqd.http_url}/metrics")[2])
    base_url = prometheus(nsqd.http_address)
    wait_until(lambda: query(base_url, "nsqd_channel_depth"), timeout=60, interval=0.5)
    status, _, body = http("GET", f"{base_url}/api/v1/label/__name__/values")
    known = set(json.loads(body)["data"])

    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert expressions
    for expr in expressions:
        names = set(re.findall(r"\b(?:nsqd|process)_[a-z0-9_]+", expr))
        assert names and names <= known, (expr, names - known)
        promql = re.sub(r"\$(instance|topic|channel)\b", ".*", expr).replace("$__rate_interval", "1m")
        query(base_url, promql)  # a 200: Prometheus parsed it
