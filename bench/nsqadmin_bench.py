"""How fast nsqadmin answers over a big cluster, with real daemons only:
nsqlookupd, N nsqd (default 20) each holding T topics (default 200) with C
channels each (default 2), and nsqadmin over them with its default flags
but --http-client-request-timeout=2s (for a shorter frozen-node case).

    python bench/nsqadmin_bench.py [--nsqd 20] [--topics 200] [--channels 2] [--rounds 20]

Times /api/topics, /api/topics/<topic>, a topic page, a channel page, the
topics page and the heavier rest (/api/counter reads every nsqd's whole
/stats, as the history sampler does; /lookup asks nsqlookupd about every
topic): median, 95th percentile and worst of --rounds requests each. Then it
freezes one nsqd (SIGSTOP: still registered, never answering) and times the
topic page and /api/topics/<topic> again: they must answer, with a warning,
within nsqadmin's --http-client-request-timeout.
"""

import argparse
import concurrent.futures
import json
import os
import signal
import statistics
import tempfile
import time
import urllib.error
import urllib.request

from nsqpy.localcluster import DaemonProcess, LocalCluster

REQUEST_TIMEOUT = 2.0  # nsqadmin's --http-client-request-timeout for this run


def fetch(url: str, method: str = "GET") -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def populate(nsqd: DaemonProcess, topics: int, channels: int) -> None:
    for t in range(topics):
        fetch(f"{nsqd.http_url}/topic/create?topic=bench_{t:03d}", "POST")
        for c in range(channels):
            fetch(f"{nsqd.http_url}/channel/create?topic=bench_{t:03d}&channel=ch{c}", "POST")


def publish_some(nsqd: DaemonProcess, topics: int) -> None:
    for t in range(0, topics, 10):
        request = urllib.request.Request(f"{nsqd.http_url}/mpub?topic=bench_{t:03d}", data=b"m\n" * 100,
                                         method="POST")
        urllib.request.urlopen(request, timeout=30).read()


def wait_registered(lookupd: DaemonProcess, nsqd_count: int, topics: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    last = f"bench_{topics - 1:03d}"
    while time.monotonic() < deadline:
        status, body = fetch(f"{lookupd.http_url}/lookup?topic={last}")
        if status == 200 and len(json.loads(body)["producers"]) == nsqd_count:
            return
        time.sleep(0.5)
    raise TimeoutError("nsqd did not register every topic with nsqlookupd in time")


def timed(url: str, rounds: int) -> dict:
    fetch(url)  # warm up connections and caches
    times, status, body = [], 0, b""
    for _ in range(rounds):
        started = time.perf_counter()
        status, body = fetch(url)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"status": status, "median_ms": statistics.median(times),
            "p95_ms": times[max(0, int(len(times) * 0.95) - 1)], "max_ms": times[-1], "bytes": len(body),
            "body": body}


def row(label: str, result: dict) -> str:
    return (f"{label:<34} {result['status']:>4} {result['median_ms']:>9.1f} {result['p95_ms']:>9.1f} "
            f"{result['max_ms']:>9.1f} {result['bytes']:>9,}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nsqd", type=int, default=20)
    p.add_argument("--topics", type=int, default=200)
    p.add_argument("--channels", type=int, default=2)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as data:
        cluster = LocalCluster(args.nsqd, data, ephemeral_ports=True)
        started = time.monotonic()
        cluster.start()
        admin = None
        try:
            print(f"started nsqlookupd + {args.nsqd} nsqd in {time.monotonic() - started:.1f}s", flush=True)
            started = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda d: populate(d, args.topics, args.channels), cluster.nsqds))
                list(pool.map(lambda d: publish_some(d, args.topics), cluster.nsqds))
            wait_registered(cluster.lookupd, args.nsqd, args.topics)
            print(f"created {args.topics} topics x {args.channels} channels on each nsqd "
                  f"({args.nsqd * args.topics * (1 + args.channels):,} queues) in {time.monotonic() - started:.1f}s",
                  flush=True)
            admin = DaemonProcess("nsqadmin", [
                "--http-address=127.0.0.1:0", f"--lookupd-http-address={cluster.lookupd.http_address}",
                f"--http-client-request-timeout={REQUEST_TIMEOUT:g}s"], ready=("HTTP",),
                log_path=os.path.join(data, "nsqadmin.log")).start()
            time.sleep(6)  # let the history sampler take a sample or two of everything
            base = admin.http_url
            print(f"\n{'request':<34} {'code':>4} {'median ms':>9} {'p95 ms':>9} {'max ms':>9} {'bytes':>9}")
            for label, path in [("GET /api/topics", "/api/topics"),
                                ("GET /api/topics/bench_000", "/api/topics/bench_000"),
                                ("GET /api/topics/bench_000/ch0", "/api/topics/bench_000/ch0"),
                                ("topic page /topics/bench_000", "/topics/bench_000"),
                                ("channel page /topics/bench_000/ch0", "/topics/bench_000/ch0"),
                                ("topics page /", "/"),
                                ("GET /api/nodes", "/api/nodes"),
                                ("node page /nodes/<nsqd0>", f"/nodes/{cluster.nsqds[0].http_address}"),
                                ("GET /api/counter (every /stats)", "/api/counter"),
                                ("lookup page /lookup", "/lookup")]:
                print(row(label, timed(base + path, args.rounds)), flush=True)

            frozen = cluster.nsqds[0].process
            os.kill(frozen.pid, signal.SIGSTOP)
            try:
                print(f"\none nsqd frozen (SIGSTOP); --http-client-request-timeout={REQUEST_TIMEOUT:g}s")
                for label, path in [("topic page /topics/bench_000", "/topics/bench_000"),
                                    ("GET /api/topics/bench_000", "/api/topics/bench_000")]:
                    result = timed(base + path, 3)
                    warned = b"WARNING" in result["body"] or b"did not answer" in result["body"]
                    print(row(label, result) + f"  warning shown: {warned}", flush=True)
            finally:
                os.kill(frozen.pid, signal.SIGCONT)
        finally:
            if admin is not None:
                admin.stop()
                admin.kill()
            cluster.stop()


if __name__ == "__main__":
    main()
