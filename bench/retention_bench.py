"""What retained topics cost and give, ours against ours in one run, with
nsqd's CPU per message beside the rates (the machine's noise moves rates,
less so their ratios):

    python bench/retention_bench.py [publish|fanout|read|replay|durable ...] [--runfor 5]

* publish: bench_writer's PUB and MPUB 200 into a topic with an offline
  channel, retained (--retention=1h) against plain, in memory mode and in
  durable mode (--mem-queue-size=0 --sync-every=1).
* fanout: 100,000 messages published into a topic with 1, 10 and 50
  channels, then every channel drained by bench_reader: in and out rates and
  nsqd CPU per delivery, retained against plain.
* read: 500,000 x 200 B read from the log with GET /topic/read (16 MiB per
  request) against the same drained from a channel by bench_reader (what a
  Spark reader costs nsqd today): msgs/s and nsqd CPU µs per message.
* replay: 200,000 messages delivered to one bench_reader from a channel
  replaying the log (from=earliest) against a channel holding the same
  backlog live.
* durable: durable mode end to end with two channels, retained against
  plain: publish rate, bytes on disk, then both channels drained.
"""

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands

sys.path.insert(0, str(Path(__file__).parent))
from cpu_meter import cpu_seconds  # noqa: E402

HERE = Path(__file__).parent
RETAINED = ("--retention=1h",)
DURABLE = ("--mem-queue-size=0", "--sync-every=1")
BODY = b"a" * 200


@contextmanager
def daemon(*flags: str):
    with tempfile.TemporaryDirectory() as data, nsqd_process(data, *flags) as nsqd:
        yield nsqd


def post(nsqd, path: str) -> bytes:
    request = urllib.request.Request(f"{nsqd.http_url}/{path}", method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def tool(name: str, nsqd, *args: str) -> dict:
    out = subprocess.run([sys.executable, str(HERE / f"{name}.py"), "--tcp-address", nsqd.tcp_address, *args],
                         capture_output=True, text=True, check=True, timeout=900)
    return json.loads(out.stdout.splitlines()[-1])


def cpu_of(nsqd) -> float:
    return cpu_seconds(nsqd.process.pid)


def fill(nsqd, topic: str, count: int, batch: int = 1000) -> None:
    """``count`` messages of 200 B, MPUBs of ``batch`` over one connection."""
    import socket
    with socket.create_connection(nsqd.tcp_hostport) as sock:
        sock.sendall(b"  V2")
        command = commands.mpub(topic, [BODY] * batch)
        for _ in range(count // batch):
            sock.sendall(command)
            if sock.recv(64)[-2:] != b"OK":
                raise SystemExit("MPUB refused")


def drain_each(nsqd, topic: str, channels: list[str]) -> tuple[float, float]:
    """Each channel drained by bench_reader in turn. -> (deliveries/s, nsqd CPU µs per delivery)."""
    before = cpu_of(nsqd)
    delivered, seconds = 0, 0.0
    for channel in channels:
        result = tool("bench_reader", nsqd, "--topic", topic, "--channel", channel, "--runfor", "600")
        delivered += result["messages"]
        seconds += result["seconds"]
    return delivered / seconds, (cpu_of(nsqd) - before) / delivered * 1e6


def table(title: str, header: str, rows: list[str]) -> None:
    print(f"\n### {title}\n")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for row in rows:
        print(row)
    print(flush=True)


def publish(args) -> None:
    rows = []
    for mode, flags in (("memory", ()), ("durable", DURABLE)):
        for kind, batch in (("PUB", "1"), ("MPUB 200", "200")):
            measured = {}
            for label, extra in (("plain", ()), ("retained", RETAINED)):
                with daemon(*flags, *extra) as nsqd:
                    post(nsqd, "topic/create?topic=bench")
                    post(nsqd, "channel/create?topic=bench&channel=offline")
                    before = cpu_of(nsqd)
                    result = tool("bench_writer", nsqd, "--topic", "bench", "--runfor", args.runfor,
                                  "--batch-size", batch)
                    measured[label] = (result["rate"], (cpu_of(nsqd) - before) / result["messages"] * 1e6)
            (plain, plain_cpu), (kept, kept_cpu) = measured["plain"], measured["retained"]
            rows.append(f"| {mode} | {kind} | {plain:,.0f} | {kept:,.0f} | {kept / plain:.2f}x | "
                        f"{plain_cpu:.2f} | {kept_cpu:.2f} |")
            print(rows[-1], flush=True)
    table("Publishing into a retained topic", "| mode | write | plain msgs/s | retained msgs/s | ratio | "
          "plain CPU µs/msg | retained CPU µs/msg |", rows)


def fanout(args) -> None:
    count = 100_000
    rows = []
    for channels in (1, 10, 50):
        for label, extra in (("plain", ()), ("retained", RETAINED)):
            with daemon(*extra) as nsqd:
                post(nsqd, "topic/create?topic=fan")
                for number in range(channels):
                    post(nsqd, f"channel/create?topic=fan&channel=c{number}")
                before = cpu_of(nsqd)
                started = time.perf_counter()
                fill(nsqd, "fan", count)
                in_rate = count / (time.perf_counter() - started)
                in_cpu = (cpu_of(nsqd) - before) / count * 1e6
                out_rate, out_cpu = drain_each(nsqd, "fan", [f"c{number}" for number in range(channels)])
                rows.append(f"| {channels} | {label} | {in_rate:,.0f} | {in_cpu:.2f} | {out_rate:,.0f} | "
                            f"{out_cpu:.2f} |")
                print(rows[-1], flush=True)
    table("Fan-out (100,000 messages)", "| channels | topic | in msgs/s | in CPU µs/msg | out deliveries/s | "
          "out CPU µs/delivery |", rows)


def read(args) -> None:
    count = 500_000
    rows = []
    with daemon(*RETAINED) as nsqd:
        post(nsqd, "topic/create?topic=log")
        post(nsqd, "channel/create?topic=log&channel=drain")
        fill(nsqd, "log", count)
        connection = http.client.HTTPConnection(nsqd.http_address, timeout=60)
        before = cpu_of(nsqd)
        started = time.perf_counter()
        offset = received = 0
        while offset < count:
            connection.request("GET", f"/topic/read?topic=log&from={offset}&max_bytes={16 << 20}")
            response = connection.getresponse()
            received += len(response.read())
            offset = int(response.getheader("X-NSQ-Next-Offset"))
        seconds = time.perf_counter() - started
        cpu = (cpu_of(nsqd) - before) / count * 1e6
        rows.append(f"| GET /topic/read | {count / seconds:,.0f} | {received / seconds / 2**20:,.0f} | {cpu:.3f} |")
        print(rows[-1], flush=True)
        before = cpu_of(nsqd)
        result = tool("bench_reader", nsqd, "--topic", "log", "--channel", "drain", "--runfor", "600")
        cpu = (cpu_of(nsqd) - before) / result["messages"] * 1e6
        rows.append(f"| channel, delivered and FINished | {result['rate']:,.0f} | {result['mb']:,.0f} | {cpu:.3f} |")
        print(rows[-1], flush=True)
    table("Reading 500,000 x 200 B", "| read | msgs/s | MiB/s | nsqd CPU µs/msg |", rows)


def replay(args) -> None:
    count = 200_000
    rows = []
    with daemon(*RETAINED) as nsqd:
        post(nsqd, "topic/create?topic=again")
        post(nsqd, "channel/create?topic=again&channel=live")
        fill(nsqd, "again", count)
        for label, channel, setup in (("live backlog", "live", None),
                                      ("replay from earliest", "replay", "channel/create?topic=again&channel=replay"
                                                                        "&from=earliest")):
            if setup:
                post(nsqd, setup)
            before = cpu_of(nsqd)
            result = tool("bench_reader", nsqd, "--topic", "again", "--channel", channel, "--runfor", "600")
            cpu = (cpu_of(nsqd) - before) / result["messages"] * 1e6
            rows.append(f"| {label} | {result['messages']:,} | {result['rate']:,.0f} | {cpu:.2f} |")
            print(rows[-1], flush=True)
    table("One consumer, 200,000 messages", "| channel | delivered | deliveries/s | nsqd CPU µs/delivery |", rows)


def durable(args) -> None:
    """Durable mode end to end, two channels: what 20,000 published messages
    put on disk, then each channel drained (every FIN made durable)."""
    count = 20_000
    rows = []
    for label, extra in (("plain", ()), ("retained", RETAINED)):
        with tempfile.TemporaryDirectory() as data, nsqd_process(data, *DURABLE, *extra) as nsqd:
            post(nsqd, "topic/create?topic=kept")
            for channel in ("a", "b"):
                post(nsqd, f"channel/create?topic=kept&channel={channel}")
            before = cpu_of(nsqd)
            started = time.perf_counter()
            fill(nsqd, "kept", count, batch=200)
            in_rate = count / (time.perf_counter() - started)
            in_cpu = (cpu_of(nsqd) - before) / count * 1e6
            on_disk = sum(path.stat().st_size for path in Path(data).rglob("*") if path.is_file())
            out_rate, out_cpu = drain_each(nsqd, "kept", ["a", "b"])
            rows.append(f"| {label} | {in_rate:,.0f} | {in_cpu:.2f} | {on_disk / 2**20:.1f} | "
                        f"{out_rate:,.0f} | {out_cpu:.1f} |")
            print(rows[-1], flush=True)
    table("Durable mode, 2 channels, 20,000 x 200 B in MPUBs of 200", "| topic | in msgs/s | in CPU µs/msg | "
          "on disk MiB | out deliveries/s | out CPU µs/delivery |", rows)


PARTS = {"publish": publish, "fanout": fanout, "read": read, "replay": replay, "durable": durable}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("parts", nargs="*", metavar="part", help=f"any of {', '.join(PARTS)} (default: all)")
    p.add_argument("--runfor", default="5", help="seconds per publish measurement")
    args = p.parse_args()
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        p.error(f"unknown part {sorted(unknown)[0]!r}; choose from {', '.join(PARTS)}")
    for part in args.parts or PARTS:
        PARTS[part](args)


if __name__ == "__main__":
    main()
