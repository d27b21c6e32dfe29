"""What durability costs: bench_writer against nsqd with the defaults
(--mem-queue-size=10000 --sync-every=2500) and with every acknowledged
message fsynced (--mem-queue-size=0 --sync-every=1).

    python bench/durability_bench.py [--runfor 5]

A channel exists before publishing (its consumer offline), so every message
really lands in a channel queue.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from nsqpy.localcluster import nsqd_process

HERE = Path(__file__).parent
MODES = [("defaults", ()), ("fsync every message", ("--mem-queue-size=0", "--sync-every=1"))]


def writer(address: str, runfor: str, batch: str) -> dict:
    out = subprocess.run([sys.executable, str(HERE / "bench_writer.py"), "--tcp-address", address, "--runfor",
                          runfor, "--batch-size", batch, "--topic", "durable"], capture_output=True, text=True,
                         check=True, timeout=600)
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runfor", default="5")
    args = p.parse_args()
    rows = []
    for label, flags in MODES:
        for batch in ("1", "200"):
            with tempfile.TemporaryDirectory() as data, nsqd_process(data, *flags) as daemon:
                for path in ("topic/create?topic=durable", "channel/create?topic=durable&channel=offline"):
                    urllib.request.urlopen(urllib.request.Request(f"{daemon.http_url}/{path}", method="POST")).read()
                result = writer(daemon.tcp_address, args.runfor, batch)
                rows.append((label, "PUB" if batch == "1" else "MPUB 200", result["rate"], result["mb"]))
                print(f"{label}, {rows[-1][1]}: {result['rate']:,.0f} msgs/s", flush=True)
    print()
    print("| nsqd | write | msgs/s | MB/s |")
    print("|---|---|---:|---:|")
    for label, kind, rate, mb in rows:
        print(f"| {label} | {kind} | {rate:,.0f} | {mb:.1f} |")


if __name__ == "__main__":
    main()
