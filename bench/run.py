"""Start nsqd, run bench_writer (PUB, then MPUB) and bench_reader, print one table.

    python bench/run.py [--runfor 10] [--size 200] [--batch-size 200] [--rdy 2500]

Counts a received NOP-answered heartbeat as no message. Settings follow NSQ's
bench.sh: --mem-queue-size=10000000 so the figures measure the daemon, not
the disk.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from cpu_meter import cpu_seconds  # bench/ is the script's folder, first on sys.path
from nsqpy.localcluster import nsqd_process

HERE = Path(__file__).parent


def run(script: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, str(HERE / script), *args], capture_output=True, text=True,
                         check=True, timeout=600)
    print(out.stdout.splitlines()[0], flush=True)
    import json
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runfor", default="10")
    p.add_argument("--size", default="200")
    p.add_argument("--batch-size", default="200")
    p.add_argument("--rdy", default="2500")
    p.add_argument("--nsqd-arg", action="append", default=[], help="extra nsqd flag (repeatable)")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as data:
        daemon = nsqd_process(data, "--mem-queue-size=10000000", *args.nsqd_arg).start()
        try:
            pid = daemon.process.pid
            common = ["--tcp-address", daemon.tcp_address, "--size", args.size, "--runfor", args.runfor]
            for label, script, extra in [
                ("PUB (1 per round trip)", "bench_writer.py", ["--batch-size", "1", "--topic", "pub_bench"]),
                (f"MPUB (batch {args.batch_size})", "bench_writer.py", ["--batch-size", args.batch_size]),
                (f"SUB (RDY {args.rdy}, FIN each)", "bench_reader.py", ["--rdy", args.rdy]),
            ]:
                before = cpu_seconds(pid)
                result = run(script, *common, *extra)
                result["nsqd_cores"] = (cpu_seconds(pid) - before) / result["seconds"] if result["seconds"] else 0
                rows.append((label, result))
        finally:
            daemon.stop()
    print()
    print("| run | msgs/s | MB/s | nsqd CPU (cores) |")
    print("|---|---:|---:|---:|")
    for label, r in rows:
        print(f"| {label} | {r['rate']:,.0f} | {r['mb']:.1f} | {r['nsqd_cores']:.2f} |")


if __name__ == "__main__":
    main()
