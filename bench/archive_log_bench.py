"""``nsq_to_parquet --available-now`` on a retained topic (the log reader),
from exec to exit, for each ``--messages`` count, with the fixed cost
stated: the same command on a retained topic holding nothing (JVM, session,
query start and end) is timed in the same run.

    python bench/archive_log_bench.py [--messages 500000,5000000] [--master local[2]]
"""

import argparse
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands

BODY = b"x" * 200


def post(nsqd, path: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{nsqd.http_url}/{path}", method="POST"), timeout=60).read()


def fill(nsqd, topic: str, count: int) -> None:
    import socket
    post(nsqd, f"topic/create?topic={topic}")
    post(nsqd, f"topic/config?topic={topic}&retention=24h")
    command = commands.mpub(topic, [BODY] * 1000)
    with socket.create_connection(nsqd.tcp_hostport) as sock:
        sock.sendall(b"  V2")
        for _ in range(count // 1000):
            sock.sendall(command)
            if sock.recv(64)[-2:] != b"OK":
                raise SystemExit("MPUB refused")


def archive(nsqd, topic: str, master: str, out: str) -> float:
    """Seconds from exec to exit."""
    command = [str(Path(sys.executable).parent / "nsq_to_parquet"), f"--topic={topic}",
               f"--nsqd-tcp-address={nsqd.tcp_address}", f"--nsqd-http-address={nsqd.http_address}",
               f"--output-dir={out}", f"--master={master}", "--available-now"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode or "with the log reader" not in done.stdout:
        raise SystemExit(f"nsq_to_parquet exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", default="500000,5000000")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as data, nsqd_process(f"{data}/nsqd") as nsqd:
        fill(nsqd, "empty", 0)
        fixed = archive(nsqd, "empty", args.master, f"{data}/out-empty")
        print(f"fixed cost (nothing to archive): {fixed:.1f} s", flush=True)
        for count in map(int, args.messages.split(",")):
            topic = f"log{count}"
            fill(nsqd, topic, count)
            seconds = archive(nsqd, topic, args.master, f"{data}/out-{count}")
            rows.append((count, seconds))
            print(f"{count:,}: {seconds:.1f} s", flush=True)
    print(f"\n| nsq_to_parquet --available-now, log reader, {args.master} | exec to exit | msgs/s | "
          f"fixed cost share | msgs/s beyond the fixed cost |")
    print("|---|---:|---:|---:|---:|")
    print(f"| nothing to archive | {fixed:.1f} s | | | |")
    for count, seconds in rows:
        print(f"| {count:,} x 200 B | {seconds:.1f} s | {count / seconds:,.0f} | {fixed / seconds:.0%} | "
              f"{count / max(seconds - fixed, 1e-9):,.0f} |")


if __name__ == "__main__":
    main()
