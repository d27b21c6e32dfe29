"""nsqd in the shapes deployments have, side by side with NSQ's Go nsqd.

    python bench/shapes.py [fanout] [big] [durable] [consumers] [producers]
                           [durable-producers] [secure] [cores]
                           [--rounds 2] [--no-pure] [--reference DIR]

NSQ's own benchmark is one topic, one channel, 200-byte messages in
memory. These are the shapes production has, driven identically for each
nsqd by NSQ's Go bench tools (bench_writer, bench_pub, bench_reader from
``--reference``): ours compiled, ours as pure Python (``NSQPY_PURE=1``) and
Go's nsqd 1.3.0 (crowds of connections, which the Go tools do not make,
by ``bench/crowd.py``, the same way for each), a fresh daemon and data dir for every measurement, the
daemons alternating ``--rounds`` times. Each table gives the median of the
rounds and ours/Go.

- ``fanout``: one topic with 1, 10 and 50 channels. bench_writer MPUBs for
  3 s (batches of 200, 200 B), then one bench_reader per channel reads for
  2 s, all at once: msgs/s in, deliveries/s out (every channel's summed),
  and nsqd's CPU time per delivery. A channel emptied before its reader's
  end would understate the rate: such a row is marked ``(drained)``.
- ``big``: 64 KiB and 1 MiB bodies (``--max-msg-size`` and
  ``--max-body-size`` raised, everything in memory): MPUB for 3 s, read for
  2 s; MiB/s in and out and nsqd's peak RSS (``(drained)`` as in fanout).
- ``durable``: ``--mem-queue-size=0`` with ``--sync-every`` 1 and 2500:
  PUB (bench_pub), MPUB (batches of 200) and SUB, 3 s each.
- ``consumers``: a worker pool, 2,000 connections at RDY 1 on one channel,
  while 100 connections PUB (one in flight each): deliveries/s, p99
  publish-to-delivery, nsqd's CPU time per delivery and the driver's cores.
- ``producers``: 200 connections PUBbing, one in flight each: PUBs/s, p99
  PUB round trip, nsqd's CPU time per PUB and the driver's cores.
- ``durable-producers``: the same crowd with ``--mem-queue-size=0
  --sync-every=1``, where every OK waits for its message's fsync.
- ``secure``: the benchmark's steps over TLS with snappy (the Go tools
  speak neither): nsqpy's client (``bench/clients/nsqpy_client.py``) MPUBs
  for 3 s, PUBs one at a time for 3 s, then reads everything back; msgs/s,
  nsqd's CPU time per delivery and the client's cores.
- ``cores``: one host's cores, NSQ's way: 1 or 2 nsqd of ours against Go's
  one nsqd (which uses every core by itself); two bench_writers for 3 s,
  then two bench_readers for 2 s, spread over the nsqd. msgs/s in and out
  summed over the nsqd, and the cores they used together.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from cpu_meter import cpu_seconds  # bench/ is the script's folder, first on sys.path
from nsqpy.localcluster import nsqd_process

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "nsq-v1.3.0" / "bin"
RESULT = re.compile(r"([\d.]+)mb/s - ([\d.]+)ops/s")
KIB = 1024
FANOUT_READ = 2  # seconds every channel's reader reads
BIG_WRITE, BIG_READ = 3, 2  # seconds: more written than read, so the reader never runs dry


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def post(daemon, path: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{daemon.http_url}{path}", method="POST"), timeout=30).read()


def create_channels(daemon, topic: str, channels: list[str]) -> None:
    """Before any publish, so every message is queued on each of them."""
    post(daemon, f"/topic/create?topic={topic}")
    for channel in channels:
        post(daemon, f"/channel/create?topic={topic}&channel={channel}")


def depth(daemon, topic: str, channel: str) -> int:
    with urllib.request.urlopen(f"{daemon.http_url}/stats?format=json&topic={topic}&channel={channel}",
                                timeout=30) as answer:
        stats = json.load(answer)
    return sum(c["depth"] for t in stats["topics"] for c in t["channels"] if c["channel_name"] == channel)


class Runner:
    """Starts each kind of nsqd and drives it with the Go bench tools."""

    def __init__(self, reference: Path, pure: bool):
        self.reference = reference
        self.kinds = {"ours": {}, **({"ours pure": {"NSQPY_PURE": "1"}} if pure else {}), "go": None}

    def nsqd(self, kind: str, data: str, *flags: str):
        go = self.kinds[kind] is None
        daemon = nsqd_process(data, *flags, executable=str(self.reference / "nsqd") if go else None)
        daemon.env = self.kinds[kind]
        return daemon.start(timeout=60)

    def tool(self, name: str, daemon, seconds: float, *flags: str) -> subprocess.Popen:
        return subprocess.Popen([str(self.reference / name), f"-nsqd-tcp-address={daemon.tcp_address}",
                                 f"-runfor={seconds}s", *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)

    @staticmethod
    def result(tool: subprocess.Popen) -> tuple[float, float]:
        """(MiB/s, msgs/s) as the tool printed them."""
        output, _ = tool.communicate(timeout=300)
        match = RESULT.search(output)
        if match is None:
            raise RuntimeError(f"no result line in: {output[-500:]}")
        return float(match.group(1)), float(match.group(2))

    def measure(self, kind: str, flags: tuple, steps, count: int = 1) -> dict:
        """``steps(*daemons) -> dict`` against ``count`` fresh nsqd of ``kind``."""
        with tempfile.TemporaryDirectory(prefix="shapes-") as data:
            daemons = []
            try:
                for number in range(count):
                    path = Path(data) / str(number)
                    path.mkdir()
                    daemons.append(self.nsqd(kind, str(path), *flags))
                return steps(*daemons)
            finally:
                for daemon in daemons:
                    daemon.kill()


def fanout(runner: Runner, kind: str, channels: int) -> dict:
    def steps(daemon):
        pid = daemon.process.pid
        create_channels(daemon, "fan", [f"c{number}" for number in range(channels)])
        _, into = runner.result(runner.tool("bench_writer", daemon, 3, "-topic=fan", "-size=200", "-batch-size=200"))
        before = cpu_seconds(pid)
        readers = [runner.tool("bench_reader", daemon, FANOUT_READ, "-topic=fan", f"-channel=c{number}", "-size=200")
                   for number in range(channels)]
        out = sum(runner.result(reader)[1] for reader in readers)
        cpu = cpu_seconds(pid) - before
        drained = any(depth(daemon, "fan", f"c{number}") == 0 for number in range(channels))
        return {"in": into, "out": out, "us_per_delivery": cpu / (out * FANOUT_READ) * 1e6 if out else 0.0,
                "drained": drained}

    return runner.measure(kind, ("--mem-queue-size=100000000",), steps)


def big(runner: Runner, kind: str, size: int) -> dict:
    batch = max(1, (4 * KIB * KIB) // size)

    def steps(daemon):
        create_channels(daemon, "big", ["ch"])
        into, _ = runner.result(runner.tool("bench_writer", daemon, BIG_WRITE, "-topic=big", f"-size={size}",
                                            f"-batch-size={batch}"))
        out, _ = runner.result(runner.tool("bench_reader", daemon, BIG_READ, "-topic=big", "-channel=ch",
                                           f"-size={size}"))
        return {"in": into, "out": out, "rss": peak_rss_mib(daemon.process.pid),
                "drained": depth(daemon, "big", "ch") == 0}

    flags = ("--mem-queue-size=100000000", f"--max-msg-size={2 * size}", f"--max-body-size={8 * KIB * KIB}")
    return runner.measure(kind, flags, steps)


def durable(runner: Runner, kind: str, sync_every: int) -> dict:
    def steps(daemon):
        create_channels(daemon, "dur", ["ch"])
        _, pub = runner.result(runner.tool("bench_pub", daemon, 3, "-topic=dur_pub", "-size=200"))
        _, mpub = runner.result(runner.tool("bench_writer", daemon, 3, "-topic=dur", "-size=200", "-batch-size=200"))
        _, sub = runner.result(runner.tool("bench_reader", daemon, 3, "-topic=dur", "-channel=ch", "-size=200"))
        return {"pub": pub, "mpub": mpub, "sub": sub}

    return runner.measure(kind, ("--mem-queue-size=0", f"--sync-every={sync_every}"), steps)


def crowd(shape: str, count_flag: str, flags: tuple[str, ...] = ("--mem-queue-size=100000000",)):
    """``bench/crowd.py``'s shape ``shape`` with ``count`` connections, nsqd run with ``flags``."""
    def measure(runner: Runner, kind: str, count: int) -> dict:
        def steps(daemon):
            create_channels(daemon, "crowd", ["workers"])
            driver = subprocess.run([sys.executable, str(Path(__file__).with_name("crowd.py")), shape,
                                     f"--tcp-address={daemon.tcp_address}", f"--nsqd-pid={daemon.process.pid}",
                                     f"{count_flag}={count}"], capture_output=True, text=True, timeout=300)
            if driver.returncode:
                raise RuntimeError(f"crowd.py failed: {driver.stderr[-500:]}")
            return json.loads(driver.stdout)

        return runner.measure(kind, flags, steps)

    return measure


class Certificates:
    """The TLS files of the run, made on first use and removed at exit."""

    def __init__(self):
        self.folder = None  # a TemporaryDirectory, which removes itself at exit
        self.certs = None

    def __call__(self):
        if self.folder is None:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test suite's certificate maker
            from tests.support.certs import make_certs

            self.folder = tempfile.TemporaryDirectory(prefix="shapes-tls-")
            self.certs = make_certs(Path(self.folder.name))
        return self.certs


CERTIFICATES = Certificates()
CLIENT = Path(__file__).with_name("clients") / "nsqpy_client.py"
SECURE_STEP = 3  # seconds of each publishing step


def secure(runner: Runner, kind: str, compression: str) -> dict:
    """NSQ's benchmark steps through nsqpy's client with ``compression``
    (``tls,snappy``): the same client process for every nsqd, so the
    client's own cores are in the result."""
    certs = CERTIFICATES()

    def client(daemon, mode: str, topic: str, amount: float) -> tuple[float, float, float]:
        """(msgs/s, client cores, nsqd CPU µs per message)"""
        before = cpu_seconds(daemon.process.pid)
        run = subprocess.run([sys.executable, str(CLIENT), mode, daemon.tcp_address, topic, str(amount), compression,
                              certs.ca], capture_output=True, text=True, timeout=300)
        if run.returncode:
            raise RuntimeError(f"nsqpy_client.py failed: {run.stderr[-500:]}")
        nsqd = cpu_seconds(daemon.process.pid) - before
        result = json.loads(run.stdout.splitlines()[-1])
        return (result["messages"] / result["seconds"], result["cpu"] / result["seconds"],
                nsqd / result["messages"] * 1e6)

    def steps(daemon):
        channel = compression.replace(",", "_")  # the channel nsqpy_client.py's sub reads
        create_channels(daemon, "sec", [channel])
        mpub, mpub_client, _ = client(daemon, "pub", "sec", SECURE_STEP)
        pub, pub_client, _ = client(daemon, "pub1", "sec_pub", SECURE_STEP)
        sub, sub_client, sub_nsqd = client(daemon, "sub", "sec", depth(daemon, "sec", channel))
        return {"mpub": mpub, "pub": pub, "sub": sub, "sub_us": sub_nsqd,
                "client_cpu": max(mpub_client, pub_client, sub_client)}

    flags = ("--mem-queue-size=100000000", f"--tls-cert={certs.server_cert}", f"--tls-key={certs.server_key}")
    return runner.measure(kind, flags, steps)


CORES_WRITE, CORES_READ = 3, 2  # seconds


def cores(runner: Runner, kind: str, processes: int) -> dict:
    """NSQ's topology on one host: ``processes`` nsqd of ours (Go's nsqd is
    always one, since it uses every core itself), two bench_writers then two
    bench_readers spread over them, each writing to and reading from its
    own nsqd as producers and consumers do in NSQ's deployment. Totals
    across the nsqd, and the cores they used together."""
    count = 1 if kind == "go" else processes

    def steps(*daemons):
        def used() -> float:
            return sum(cpu_seconds(daemon.process.pid) for daemon in daemons)

        for daemon in daemons:
            create_channels(daemon, "cores", ["ch"])
        before = used()
        writers = [runner.tool("bench_writer", daemons[number % count], CORES_WRITE, "-topic=cores", "-size=200",
                               "-batch-size=200") for number in range(2)]
        into = sum(runner.result(writer)[1] for writer in writers)
        written = used()
        readers = [runner.tool("bench_reader", daemons[number % count], CORES_READ, "-topic=cores", "-channel=ch",
                               "-size=200") for number in range(2)]
        out = sum(runner.result(reader)[1] for reader in readers)
        return {"in": into, "in_cores": (written - before) / CORES_WRITE, "out": out,
                "out_cores": (used() - written) / CORES_READ}

    return runner.measure(kind, ("--mem-queue-size=100000000",), steps, count=count)


SHAPES = {
    "fanout": (fanout, (1, 10, 50), "channels",
               [("in", "MPUB msgs/s in"), ("out", "deliveries/s out"), ("us_per_delivery", "nsqd CPU µs/delivery")]),
    "big": (big, (64 * KIB, KIB * KIB), "body bytes",
            [("in", "MiB/s in"), ("out", "MiB/s out"), ("rss", "nsqd peak RSS MiB")]),
    "durable": (durable, (1, 2500), "--sync-every", [("pub", "PUB msgs/s"), ("mpub", "MPUB msgs/s"),
                                                     ("sub", "SUB msgs/s")]),
    "consumers": (crowd("consumers", "--consumers"), (2000,), "RDY 1 consumers (100 producers)",
                  [("published", "PUBs/s"), ("rate", "deliveries/s"), ("p99_ms", "p99 publish to delivery ms"),
                   ("nsqd_us", "nsqd CPU µs/delivery"), ("driver_cpu", "driver CPU cores")]),
    "producers": (crowd("producers", "--producers"), (200,), "PUB clients",
                  [("rate", "PUB msgs/s"), ("p99_ms", "p99 PUB round trip ms"), ("nsqd_us", "nsqd CPU µs/PUB"),
                   ("driver_cpu", "driver CPU cores")]),
    "durable-producers": (crowd("producers", "--producers", ("--mem-queue-size=0", "--sync-every=1")), (200,),
                          "PUB clients", [("rate", "PUB msgs/s"), ("p99_ms", "p99 PUB round trip ms"),
                                          ("nsqd_us", "nsqd CPU µs/PUB")]),
    "secure": (secure, ("tls,snappy",), "client options",
               [("mpub", "MPUB msgs/s"), ("pub", "PUB msgs/s"), ("sub", "SUB msgs/s"),
                ("sub_us", "nsqd CPU µs/delivery"), ("client_cpu", "client CPU cores (busiest step)")]),
    "cores": (cores, (1, 2), "nsqd processes of ours (Go: 1)",
              [("in", "MPUB msgs/s in"), ("in_cores", "nsqd cores writing"), ("out", "deliveries/s out"),
               ("out_cores", "nsqd cores reading")]),
}


def table(runner: Runner, name: str, rounds: int) -> None:
    measure, settings, setting_name, columns = SHAPES[name]
    print(f"\n## {name} (median of {rounds} alternations)\n", flush=True)
    print(f"| {setting_name} | nsqd | " + " | ".join(label for _, label in columns) + " |")
    print("|---|---|" + "---:|" * len(columns))
    for setting in settings:
        samples: dict[str, list[dict]] = {kind: [] for kind in runner.kinds}
        for _ in range(rounds):
            for kind in runner.kinds:
                samples[kind].append(measure(runner, kind, setting))
        medians = {kind: {key: statistics.median(s[key] for s in runs) for key, _ in columns}
                   for kind, runs in samples.items()}
        for kind, values in medians.items():
            drained = " (drained)" if any(s.get("drained") for s in samples[kind]) else ""
            cells = " | ".join(f"{values[key]:,.0f}" if values[key] >= 100 else
                               f"{values[key]:,.1f}" if values[key] >= 10 else f"{values[key]:.2f}"
                               for key, _ in columns)
            print(f"| {setting} | {kind}{drained} | {cells} |", flush=True)
        for kind in runner.kinds:
            if kind != "go":
                ratios = " | ".join(f"{medians[kind][key] / medians['go'][key]:.2f}×" if medians["go"][key] else "-"
                                    for key, _ in columns)
                print(f"| {setting} | {kind}/go | {ratios} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="*", help=f"some of {', '.join(SHAPES)} (default all)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the daemons (default 2)")
    parser.add_argument("--no-pure", action="store_true", help="leave out ours as pure Python")
    parser.add_argument("--reference", type=Path, default=REFERENCE, help="folder of NSQ's Go binaries")
    args = parser.parse_args()
    unknown = set(args.shapes) - set(SHAPES)
    if unknown:
        parser.error(f"no shape {', '.join(sorted(unknown))}: choose from {', '.join(SHAPES)}")
    if not (args.reference / "nsqd").exists():
        parser.error(f"no Go nsqd in {args.reference} (--reference)")
    runner = Runner(args.reference, pure=not args.no_pure)
    for name in args.shapes or SHAPES:
        table(runner, name, args.rounds)


if __name__ == "__main__":
    main()
