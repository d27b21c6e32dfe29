"""How long nsqd takes to answer a Prometheus scrape of many topics.

    python bench/metrics_bench.py [--topics 5000] [--channels 2] [--rounds 20]

Starts a real nsqd (temp data dir, ephemeral ports), creates the topics and
their channels over HTTP, publishes one message per topic so every figure is
live, then times --rounds sequential ``GET /metrics``: median, 95th
percentile and worst, with the body size. The issue's budget is a scrape of
5,000 topics x 2 channels in under 200 ms.
"""

import argparse
import concurrent.futures
import http.client
import statistics
import tempfile
import threading
import time

from nsqpy.localcluster import nsqd_process

_local = threading.local()


def _post(address: str, path: str, body: bytes = b"") -> None:
    """One keep-alive connection per worker thread."""
    connection = getattr(_local, "connection", None)
    if connection is None:
        host, port = address.rsplit(":", 1)
        connection = _local.connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", path, body)
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        raise SystemExit(f"POST {path}: HTTP {response.status}")


def populate(address: str, topics: int, channels: int) -> None:
    def one_topic(index: int) -> None:
        topic = f"bench_topic_{index}"
        _post(address, f"/topic/create?topic={topic}")
        for channel in range(channels):
            _post(address, f"/channel/create?topic={topic}&channel=ch{channel}")
        _post(address, f"/pub?topic={topic}", b"x" * 100)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(one_topic, range(topics)))


def scrape(address: str) -> tuple[float, int]:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    started = time.perf_counter()
    connection.request("GET", "/metrics")
    body = connection.getresponse().read()
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed, len(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=5000)
    parser.add_argument("--channels", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_path, nsqd_process(data_path) as nsqd:
        started = time.perf_counter()
        populate(nsqd.http_address, args.topics, args.channels)
        print(f"created {args.topics} topics x {args.channels} channels in {time.perf_counter() - started:.1f}s")
        scrape(nsqd.http_address)  # warm-up
        timings, size = [], 0
        for _ in range(args.rounds):
            elapsed, size = scrape(nsqd.http_address)
            timings.append(elapsed * 1000)
        timings.sort()
        p95 = timings[min(len(timings) - 1, int(len(timings) * 0.95))]
        print(f"GET /metrics ({size / 1e6:.1f} MB, {args.rounds} rounds): median {statistics.median(timings):.0f} ms, "
              f"p95 {p95:.0f} ms, worst {timings[-1]:.0f} ms")


if __name__ == "__main__":
    main()
