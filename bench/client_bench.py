"""Python NSQ clients side by side against one nsqd: nsqpy, pynsq, gnsq.

    python bench/client_bench.py [--runfor 5] [--messages 200000] [--clients nsqpy,pynsq,gnsq]
                                 [--baseline SRC] [--rounds N] [--nsqd PATH]

Publish: MPUB batches of 200 x 200-byte messages, one batch in flight at a
time, for --runfor seconds. Consume: --messages messages already queued on
the client's own channel, max_in_flight 2500, FIN each. Each client runs in
its own process (gevent and tornado stay apart) and reports the CPU time it
spent (user + system) beside the wall time; nsqd's CPU over the same step is
read from /proc (Linux). nsqd may be the limit of a step: CPU per message is
then the client's own cost, and nsqd's shows how close it is to a full core.

``--baseline SRC`` (a ``src`` folder holding another version of the
``nsqpy`` package, e.g. ``git archive HEAD~5 src | tar -x -C /tmp/old``)
adds rows for that version's client against the same nsqd in the same run:
before and after, measured alike. ``--rounds`` alternates every client that
many times, so that noise shows as a spread. ``--nsqd PATH`` runs the steps
against another nsqd program (NSQ's Go nsqd, say), so that the clients can
be compared where nsqd is not the limit.

When NSQ's Go programs are in ``--reference``, two Go consumers (go-nsq)
read the same way beside the Python clients, consume only: ``nsq_tail``
(``-n`` messages, ``-max-in-flight=2500``, to /dev/null) and
``bench_reader`` (RDY 2500 for one second on a channel holding more than
it can read in that time). Their CPU time is the process's whole, start
included.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # the test suite's certificate maker
from nsqpy.client import SyncProducer  # noqa: E402
from nsqpy.localcluster import nsqd_process  # noqa: E402
from cpu_meter import cpu_seconds  # noqa: E402  (bench/ is the script's folder, first on sys.path)
from shapes import REFERENCE, RESULT, depth  # noqa: E402
from tests.support.certs import make_certs  # noqa: E402

HERE = Path(__file__).parent / "clients"
CLIENTS = ["nsqpy", "pynsq", "gnsq"]
GO_CONSUMERS = ["nsq_tail", "bench_reader"]
BENCH_READER_FILL = 2_000_000  # more than bench_reader reads in its second


def post(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10).read()


def run(client: str, *args: str, source: str | None = None) -> dict:
    """One client process; ``source``: import nsqpy from there instead."""
    env = {**os.environ, "PYTHONPATH": source} if source else None
    out = subprocess.run([sys.executable, str(HERE / f"{client}_client.py"), *args], capture_output=True,
                         text=True, timeout=600, env=env)
    if out.returncode:
        raise SystemExit(f"{client} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fill(address: str, topic: str, messages: int) -> None:
    with SyncProducer(address, timeout=60) as producer:
        batch = [b"a" * 200] * 1000
        for _ in range(messages // 1000):
            producer.multi_publish(topic, batch)


def step(pid: int, client: str, *args: str, source: str | None) -> tuple[float, float, float]:
    """One step of one client: messages per second, then the client's and
    nsqd's CPU microseconds per message."""
    before = cpu_seconds(pid)
    result = run(client, *args, source=source)
    nsqd_cpu = cpu_seconds(pid) - before
    messages = result["messages"]
    return messages / result["seconds"], result["cpu"] / messages * 1e6, nsqd_cpu / messages * 1e6


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def go_consume(reference: Path, tool: str, daemon, topic: str, messages: int) -> tuple[float, float, float]:
    """A Go consumer's step, as ``step``'s: (msgs/s, client and nsqd CPU µs
    per message)."""
    address, pid = daemon.tcp_address, daemon.process.pid
    if tool == "nsq_tail":
        command = [f"-nsqd-tcp-address={address}", f"-topic={topic}", f"-channel={tool}", f"-n={messages}",
                   "-max-in-flight=2500"]
    else:
        command = [f"-nsqd-tcp-address={address}", f"-topic={topic}", f"-channel={tool}", "-runfor=1s",
                   "-size=200", "-rdy=2500"]
    before, nsqd_before, started = children_cpu(), cpu_seconds(pid), time.perf_counter()
    reader = tool == "bench_reader"  # prints its result line where Go's log goes, to stderr; nsq_tail the bodies
    run = subprocess.run([str(reference / tool), *command], stdout=subprocess.PIPE if reader else subprocess.DEVNULL,
                         stderr=subprocess.STDOUT if reader else subprocess.PIPE, text=True, timeout=600)
    seconds, cpu, nsqd_cpu = time.perf_counter() - started, children_cpu() - before, cpu_seconds(pid) - nsqd_before
    if run.returncode:
        raise SystemExit(f"{tool} failed:\n{(run.stdout if reader else run.stderr)[-2000:]}")
    if reader:
        rate = float(RESULT.search(run.stdout).group(2))
        if depth(daemon, topic, tool) == 0:
            raise SystemExit(f"bench_reader emptied its channel: fill more than {messages:,}")
        messages = round(rate * 1.0)
    else:
        rate = messages / seconds
    return rate, cpu / messages * 1e6, nsqd_cpu / messages * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runfor", default="5")
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated, of {', '.join(CLIENTS)}")
    p.add_argument("--baseline", metavar="SRC", help="also the nsqpy client imported from this src folder")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--nsqd", metavar="PATH", help="run this nsqd program instead of ours")
    p.add_argument("--compression", action="store_true",
                   help="instead: nsqpy's client plain, with snappy and with deflate")
    p.add_argument("--reference", type=Path, default=REFERENCE,
                   help="folder of NSQ's Go programs, for the Go consumers (left out when absent)")
    args = p.parse_args()
    runs = ([("nsqpy", []), ("nsqpy snappy", ["snappy"]), ("nsqpy deflate", ["deflate"]), ("nsqpy tls", ["tls"]),
             ("nsqpy tls+snappy", ["tls,snappy"]), ("nsqpy tls+deflate", ["tls,deflate"])] if args.compression
            else [(client, []) for client in args.clients.split(",")])
    if args.baseline:
        runs += [(f"{label} (baseline)", extra) for label, extra in runs if label.startswith("nsqpy")]
    if not args.compression and not args.baseline and (args.reference / "nsq_tail").exists():
        runs += [(f"go {tool}", []) for tool in GO_CONSUMERS]
    runs *= args.rounds
    rows = []
    with tempfile.TemporaryDirectory() as data:
        certs = make_certs(Path(data))
        tls = (f"--tls-cert={certs.server_cert}", f"--tls-key={certs.server_key}")
        with nsqd_process(data, "--mem-queue-size=10000000", *tls, executable=args.nsqd) as daemon:
            address = daemon.tcp_address
            for number, (label, extra) in enumerate(runs):
                client = label.split()[0]
                source = args.baseline if label.endswith("(baseline)") else None
                # the consume step reads a topic of its own, filled beforehand, on the channel that client uses
                topic, channel = f"client_sub_{number}", extra[0].replace(",", "_") if extra else client
                post(f"{daemon.http_url}/topic/create?topic={topic}")
                pid = daemon.process.pid
                if client == "go":
                    tool = label.split()[1]
                    post(f"{daemon.http_url}/channel/create?topic={topic}&channel={tool}")
                    fill(address, topic, BENCH_READER_FILL if tool == "bench_reader" else args.messages)
                    pub = (None, None, None)
                    sub = go_consume(args.reference, tool, daemon, topic, args.messages)
                else:
                    post(f"{daemon.http_url}/channel/create?topic={topic}&channel={channel}")
                    fill(address, topic, args.messages)
                    extra = extra + [certs.ca] if extra else extra
                    pub = step(pid, client, "pub", address, f"client_pub_{number}", args.runfor, *extra,
                               source=source)
                    sub = step(pid, client, "sub", address, topic, str(args.messages), *extra, source=source)
                for used in (topic,) if client == "go" else (f"client_pub_{number}", topic):
                    post(f"{daemon.http_url}/topic/delete?topic={used}")  # every step finds nsqd as empty as the first
                rows.append((label, *pub, *sub))
                published = (f"publish {pub[0]:,.0f} msgs/s (CPU µs/msg: client {pub[1]:.2f}, nsqd {pub[2]:.2f}), "
                             if pub[0] is not None else "")
                print(f"{label}: {published}consume {sub[0]:,.0f} msgs/s (client {sub[1]:.2f}, nsqd {sub[2]:.2f})",
                      flush=True)
            print_table(rows)  # before nsqd stops: its shutdown cannot lose the figures


def print_table(rows: list) -> None:
    print()
    print("| client | publish (MPUB 200) msgs/s | CPU µs/msg client / nsqd "
          "| consume (max_in_flight 2500) msgs/s | CPU µs/msg client / nsqd | consumed per client CPU second |")
    print("|---|---:|---:|---:|---:|---:|")
    for client, pub, pub_cpu, pub_nsqd, sub, sub_cpu, sub_nsqd in rows:
        published = f"{pub:,.0f} | {pub_cpu:.2f} / {pub_nsqd:.2f}" if pub is not None else "- | -"
        print(f"| {client} | {published} | {sub:,.0f} | {sub_cpu:.2f} / {sub_nsqd:.2f} | {1e6 / sub_cpu:,.0f} |")


if __name__ == "__main__":
    main()
