"""Python NSQ clients side by side against one nsqd: nsqpy, pynsq, gnsq.

    python bench/client_bench.py [--runfor 5] [--messages 200000]

Publish: MPUB batches of 200 x 200-byte messages, one batch in flight at a
time, for --runfor seconds. Consume: --messages messages already queued on
the client's own channel, max_in_flight 2500, FIN each. Each client runs in
its own process (gevent and tornado stay apart).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # the test suite's certificate maker
from nsqpy.client import SyncProducer  # noqa: E402
from nsqpy.localcluster import nsqd_process  # noqa: E402
from tests.support.certs import make_certs  # noqa: E402

HERE = Path(__file__).parent / "clients"
CLIENTS = ["nsqpy", "pynsq", "gnsq"]


def post(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10).read()


def run(client: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, str(HERE / f"{client}_client.py"), *args], capture_output=True,
                         text=True, timeout=600)
    if out.returncode:
        raise SystemExit(f"{client} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runfor", default="5")
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--compression", action="store_true",
                   help="instead: nsqpy's client plain, with snappy and with deflate")
    args = p.parse_args()
    runs = ([("nsqpy", []), ("nsqpy snappy", ["snappy"]), ("nsqpy deflate", ["deflate"]), ("nsqpy tls", ["tls"]),
             ("nsqpy tls+snappy", ["tls,snappy"]), ("nsqpy tls+deflate", ["tls,deflate"])] if args.compression
            else [(client, []) for client in CLIENTS])
    rows = []
    with tempfile.TemporaryDirectory() as data:
        certs = make_certs(Path(data))
        tls = (f"--tls-cert={certs.server_cert}", f"--tls-key={certs.server_key}")
        with nsqd_process(data, "--mem-queue-size=10000000", *tls) as daemon:
            address = daemon.tcp_address
            # one topic, one channel per client, all filled before anyone consumes
            post(f"{daemon.http_url}/topic/create?topic=client_sub")
            for channel in ("nsqpy", "pynsq", "gnsq", "snappy", "deflate", "tls", "tls_snappy", "tls_deflate"):
                post(f"{daemon.http_url}/channel/create?topic=client_sub&channel={channel}")
            with SyncProducer(address, timeout=60) as producer:
                batch = [b"a" * 200] * 1000
                for _ in range(args.messages // 1000):
                    producer.multi_publish("client_sub", batch)
            for label, extra in runs:
                client = label.split()[0]
                extra = extra + [certs.ca] if extra else extra
                pub = run(client, "pub", address, f"client_pub_{len(rows)}", args.runfor, *extra)
                sub = run(client, "sub", address, "client_sub", str(args.messages), *extra)
                rows.append((label, pub["messages"] / pub["seconds"], sub["messages"] / sub["seconds"]))
                print(f"{label}: publish {rows[-1][1]:,.0f} msgs/s, consume {rows[-1][2]:,.0f} msgs/s", flush=True)
    print()
    print("| client | publish (MPUB 200) msgs/s | consume (max_in_flight 2500) msgs/s |")
    print("|---|---:|---:|")
    for client, pub, sub in rows:
        print(f"| {client} | {pub:,.0f} | {sub:,.0f} |")


if __name__ == "__main__":
    main()
