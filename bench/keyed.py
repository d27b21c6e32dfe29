"""What keyed publishing costs: keyed against plain publishes on one nsqd,
with NSQ's Go nsqd's plain publishes beside them.

    python bench/keyed.py [--messages 200000] [--rounds 2] [--reference DIR]

One connection pipelines ``--messages`` 200-byte messages (100 commands
in flight), each step on a fresh nsqd and data dir, alternating the
daemons ``--rounds`` times; medians:

- ``PUB`` against ``KPUB`` (a new key each, 24 bytes), and ``MPUB`` against
  ``KMPUB`` (batches of 200): msgs/s and nsqd's CPU µs per message;
- the same keyed steps repeated (every key already held: all repeats);
- nsqd's memory per key: its resident size after the KPUB step less after
  the PUB step, per message (both leave every message queued in memory),
  and the keys file's bytes per key.

Go's nsqd runs the plain steps only (it has no keyed commands).
"""

import argparse
import asyncio
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from cpu_meter import cpu_seconds  # bench/ is the script's folder, first on sys.path
from nsqpy.eventloop import new_event_loop
from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands, keyed

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "nsq-v1.3.0" / "bin"
BODY = b"x" * 200
BATCH = 200
IN_FLIGHT = 100
OK_FRAME = b"\x00\x00\x00\x06\x00\x00\x00\x00OK"


class Pipeline(asyncio.Protocol):
    """Sends commands keeping ``IN_FLIGHT`` unanswered; done when all are answered."""

    def __init__(self, command_list: list[bytes]):
        self.commands = command_list
        self.next = 0
        self.answered = 0
        self.buffer = b""
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        self.transport = transport
        transport.write(b"  V2")
        self.send(IN_FLIGHT)

    def send(self, count: int):
        end = min(self.next + count, len(self.commands))
        self.transport.write(b"".join(self.commands[self.next:end]))
        self.next = end

    def data_received(self, data):
        self.buffer += data
        answers = len(self.buffer) // len(OK_FRAME)
        whole = answers * len(OK_FRAME)
        if self.buffer[:whole] != OK_FRAME * answers:
            if not self.done.done():
                self.done.set_exception(RuntimeError(f"nsqd answered {self.buffer[:200]!r}"))
            return
        self.buffer = self.buffer[whole:]
        self.answered += answers
        if self.answered == len(self.commands):
            self.done.set_result(None)
        else:
            self.send(answers)


def step_commands(step: str, messages: int, run: str) -> tuple[list[bytes], int]:
    """The commands of a step and the messages they carry."""
    topic = "keyed"
    key = [b"%s-%016d" % (run.encode(), index) for index in range(messages)]
    if step == "PUB":
        return [commands.pub(topic, BODY)] * messages, messages
    if step == "KPUB":
        return [keyed.kpub(topic, key[index], BODY) for index in range(messages)], messages
    batches = range(0, messages, BATCH)
    if step == "MPUB":
        return [commands.mpub(topic, [BODY] * BATCH) for _ in batches], len(batches) * BATCH
    return [keyed.kmpub(topic, key[start:start + BATCH], [BODY] * BATCH) for start in batches], len(batches) * BATCH


def drive(address: str, command_list: list[bytes]) -> float:
    async def run() -> float:
        host, _, port = address.rpartition(":")
        began = time.monotonic()
        _, pipeline = await asyncio.get_running_loop().create_connection(lambda: Pipeline(command_list), host,
                                                                         int(port))
        await asyncio.wait_for(pipeline.done, 600)
        pipeline.transport.close()
        return time.monotonic() - began

    loop = new_event_loop()
    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure(executable: str | None, steps: list[str], messages: int, repeat: bool) -> dict:
    """Each step on a fresh nsqd: msgs/s, nsqd µs/msg (and repeated, RSS, key file)."""
    results = {}
    for step in steps:
        with tempfile.TemporaryDirectory(prefix="keyed-bench-") as data:
            with nsqd_process(data, "--mem-queue-size=100000000", executable=executable) as daemon:
                command_list, count = step_commands(step, messages, "run")
                pid = daemon.process.pid
                before = cpu_seconds(pid)
                elapsed = drive(daemon.tcp_address, command_list)
                used = cpu_seconds(pid) - before
                result = {"rate": count / elapsed, "nsqd_us": used / count * 1e6, "rss_mib": rss_mib(pid)}
                if repeat and step.startswith("K"):
                    before = cpu_seconds(pid)
                    elapsed = drive(daemon.tcp_address, command_list)
                    result["repeat_rate"] = count / elapsed
                    result["repeat_nsqd_us"] = (cpu_seconds(pid) - before) / count * 1e6
                    keys_file = Path(data) / "keyed.keys"
                    result["file_bytes_per_key"] = keys_file.stat().st_size / count if keys_file.exists() else 0
                results[step] = result
    return results


def median(rounds: list[dict], step: str, field: str) -> float:
    values = [r[step][field] for r in rounds if field in r.get(step, {})]
    return statistics.median(values) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reference", default=str(REFERENCE), help="folder of NSQ's Go binaries")
    args = parser.parse_args()
    go_nsqd = Path(args.reference) / "nsqd"
    ours_rounds, go_rounds = [], []
    for _ in range(args.rounds):
        ours_rounds.append(measure(None, ["PUB", "KPUB", "MPUB", "KMPUB"], args.messages, repeat=True))
        if go_nsqd.exists():
            go_rounds.append(measure(str(go_nsqd), ["PUB", "MPUB"], args.messages, repeat=False))
    print(f"{args.messages} messages of {len(BODY)} B, one connection, {IN_FLIGHT} commands in flight; "
          f"medians of {args.rounds} rounds")
    print("| step | ours msgs/s | ours nsqd µs/msg | repeated: msgs/s | repeated: µs/msg | Go msgs/s | "
          "Go nsqd µs/msg |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for step, plain in (("PUB", "PUB"), ("KPUB", "PUB"), ("MPUB", "MPUB"), ("KMPUB", "MPUB")):
        keyed_step = step.startswith("K")
        go = (f"{median(go_rounds, plain, 'rate'):,.0f} | {median(go_rounds, plain, 'nsqd_us'):.2f}"
              if go_rounds else "— | —")
        repeated = "— | —"
        if keyed_step:
            repeated = (f"{median(ours_rounds, step, 'repeat_rate'):,.0f} | "
                        f"{median(ours_rounds, step, 'repeat_nsqd_us'):.2f}")
        print(f"| {step} | {median(ours_rounds, step, 'rate'):,.0f} | {median(ours_rounds, step, 'nsqd_us'):.2f} | "
              f"{repeated} | {go} |")
    per_key = (median(ours_rounds, "KPUB", "rss_mib") - median(ours_rounds, "PUB", "rss_mib")) * 2**20 / args.messages
    print(f"nsqd memory per key (RSS after KPUB less after PUB): {per_key:.0f} B; keys file: "
          f"{median(ours_rounds, 'KPUB', 'file_bytes_per_key'):.1f} B per key")


if __name__ == "__main__":
    sys.exit(main())
