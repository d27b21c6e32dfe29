"""What topics cost as they grow: creating them over HTTP, and ``/stats``.

    python bench/metadata_bench.py [--steps 1000,5000,10000] [--channels 2] [--clients 8]
                                   [--stats-at 5000] [--rounds 10] [--reference DIR]

Starts an nsqd (ours, then NSQ's Go nsqd from ``--reference`` when it is
there) in a fresh data directory and creates topics, each with its
channels, through ``POST /topic/create`` and ``POST /channel/create`` from
``--clients`` keep-alive connections at once, step by step up to each count
in ``--steps``: the elapsed time at each step is the curve. Both daemons
persist nsqd.dat on these calls, so the curve shows what one create costs
as the file grows. At ``--stats-at`` topics (5,000 x 2 channels = 15,000
queues) it times ``--rounds`` sequential ``GET /stats?format=json``. The
daemon's resident memory is read from /proc at each step.
"""

import argparse
import concurrent.futures
import http.client
import os
import statistics
import tempfile
import threading
import time

from nsqpy.localcluster import nsqd_process

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "reference",
                         "nsq-v1.3.0", "bin")


class Creator:
    """Creates topics and channels from a pool of threads, one keep-alive
    HTTP connection per thread."""

    def __init__(self, address: str, channels: int, clients: int):
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        self.channels = channels
        self.pool = concurrent.futures.ThreadPoolExecutor(clients)
        self.local = threading.local()

    def post(self, path: str) -> None:
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        connection.request("POST", path)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"POST {path}: HTTP {response.status}")

    def create(self, index: int) -> None:
        topic = f"bench_topic_{index}"
        self.post(f"/topic/create?topic={topic}")
        for channel in range(self.channels):
            self.post(f"/channel/create?topic={topic}&channel=ch{channel}")

    def create_range(self, start: int, stop: int) -> None:
        list(self.pool.map(self.create, range(start, stop)))

    def close(self) -> None:
        self.pool.shutdown()


def time_stats(address: str, rounds: int) -> tuple[float, int]:
    """Median milliseconds of ``GET /stats?format=json`` and the body size."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    timings, size = [], 0
    for _ in range(rounds + 1):  # the first one warms up
        started = time.perf_counter()
        connection.request("GET", "/stats?format=json")
        response = connection.getresponse()
        size = len(response.read())
        timings.append((time.perf_counter() - started) * 1000)
    connection.close()
    return statistics.median(timings[1:]), size


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run(executable: str | None, args) -> dict:
    """{"steps": [(topics, seconds since the start, RSS in MB)], "stats_ms": ..., "stats_bytes": ...}."""
    result: dict = {"steps": []}
    with tempfile.TemporaryDirectory() as data_path:
        nsqd = nsqd_process(data_path, executable=executable).start()
        creator = Creator(nsqd.http_address, args.channels, args.clients)
        try:
            started, done = time.perf_counter(), 0
            for step in args.steps:
                creator.create_range(done, step)
                done = step
                result["steps"].append((step, time.perf_counter() - started, rss_mb(nsqd.process.pid)))
                print(f"  {step:>6} topics: {result['steps'][-1][1]:7.1f} s, RSS {result['steps'][-1][2]:.0f} MB",
                      flush=True)
                if step == args.stats_at:
                    paused = time.perf_counter()
                    result["stats_ms"], result["stats_bytes"] = time_stats(nsqd.http_address, args.rounds)
                    print(f"  /stats?format=json at {step} topics: {result['stats_ms']:.0f} ms", flush=True)
                    started += time.perf_counter() - paused  # not part of the create curve
        finally:
            creator.close()
            try:
                nsqd.stop(timeout=300)  # both daemons close every queue: a minute or so at 10,000 topics
            finally:
                nsqd.kill()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="1000,5000,10000", help="topic counts to report (default 1000,5000,10000)")
    parser.add_argument("--channels", type=int, default=2, help="channels per topic (default 2)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP connections (default 8)")
    parser.add_argument("--stats-at", type=int, default=5000, help="topic count at which /stats is timed")
    parser.add_argument("--rounds", type=int, default=10, help="timed /stats requests (default 10)")
    parser.add_argument("--reference", default=REFERENCE, help="folder of NSQ's Go binaries")
    parser.add_argument("--only", choices=("ours", "go"), help="run one side only")
    args = parser.parse_args()
    args.steps = sorted(int(step) for step in args.steps.split(","))
    go_nsqd = os.path.join(args.reference, "nsqd")
    sides = {"ours": None, "go": go_nsqd if os.access(go_nsqd, os.X_OK) else ""}
    results = {}
    for name, executable in sides.items():
        if args.only and name != args.only:
            continue
        if executable == "":
            print(f"go: absent ({go_nsqd} not found)")
            continue
        print(f"{name}:", flush=True)
        results[name] = run(executable, args)
    print(f"\ncreate {args.channels} channels per topic over HTTP, {args.clients} clients (seconds, cumulative)")
    print(f"{'topics':>7} " + " ".join(f"{name:>8}" for name in results))
    for index, step in enumerate(args.steps):
        print(f"{step:>7} " + " ".join(f"{r['steps'][index][1]:8.1f}" for r in results.values()))
    print(f"\nresident memory (MB)\n{'topics':>7} " + " ".join(f"{name:>8}" for name in results))
    for index, step in enumerate(args.steps):
        print(f"{step:>7} " + " ".join(f"{r['steps'][index][2]:8.0f}" for r in results.values()))
    if any("stats_ms" in r for r in results.values()):
        queues = args.stats_at * (1 + args.channels)
        print(f"\nGET /stats?format=json at {args.stats_at} topics ({queues} queues), median of {args.rounds} (ms)")
        print(" ".join(f"{name}: {r['stats_ms']:.0f} ms ({r['stats_bytes'] / 1e6:.1f} MB)"
                       for name, r in results.items() if "stats_ms" in r))


if __name__ == "__main__":
    main()
