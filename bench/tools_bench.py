"""NSQ's utilities, ours next to NSQ's Go binaries, on the same nsqd in one run.

    python bench/tools_bench.py [--messages 200000] [--size 200]

Four targets of the utilities issue, 200-byte messages: to_nsq from a file,
nsq_tail to /dev/null, nsq_to_file (default sync interval, plain and
--gzip), nsq_to_nsq between two nsqd. Each figure is messages over the
wall time of the whole run of the tool, start-up included (about 0.3 s for
ours), from start until the last message is written (to_nsq, nsq_tail) or
FINished at the source (nsq_to_nsq; nsq_to_file: all but the last
max-in-flight, which wait for the 30 s sync interval in both tools). The nsqd are nsqpy's,
``--mem-queue-size`` large enough to keep everything in memory. Go's tools
come from /work/shared/reference (or --reference) and show "absent" without
it. The machine is shared: figures are noisy, compare within one run.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from nsqpy.client import SyncProducer
from nsqpy.localcluster import nsqd_process

REFERENCE = "/work/shared/reference/nsq-v1.3.0/bin"


def command(impl: str, tool: str, reference: str, *args: str) -> list[str] | None:
    if impl == "nsqpy":
        return [sys.executable, "-m", f"nsqpy.cli.{tool}", *args]
    binary = os.path.join(reference, tool)
    return [binary, *args] if os.access(binary, os.X_OK) else None


def preload(nsqd, topic: str, count: int, body: bytes) -> None:
    with SyncProducer(nsqd.tcp_address, timeout=60) as producer:
        for start in range(0, count, 1000):
            producer.multi_publish(topic, [body] * min(1000, count - start))


def channel(nsqd, topic: str, name: str) -> dict:
    url = f"{nsqd.http_url}/stats?format=json&topic={topic}&channel={name}&include_clients=false"
    with urllib.request.urlopen(url, timeout=5) as response:
        stats = json.load(response)
    for entry in stats["topics"] or []:
        for found in entry["channels"]:
            if found["channel_name"] == name:
                return found
    return {}


def wait_finished(nsqd, topic: str, name: str, count: int, process, timeout: float) -> None:
    """Until ``count`` messages of the channel are FINished."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = channel(nsqd, topic, name)
        if found and found["message_count"] - found["depth"] - found["in_flight_count"] >= count:
            return
        if process.poll() is not None:
            raise RuntimeError(f"exited early with {process.returncode}")
        time.sleep(0.02)
    raise TimeoutError(f"{topic}/{name} not finished in {timeout}s")


def timed_consumer(argv, nsqd, topic: str, name: str, count: int, timeout: float) -> float:
    """Run a consuming tool until the channel has FINished ``count``; seconds."""
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_finished(nsqd, topic, name, count, process, timeout)
        return time.monotonic() - started
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Bench:
    def __init__(self, args, workdir: str):
        self.args = args
        self.workdir = workdir
        self.body = b"x" * args.size
        self.source = nsqd_process(os.path.join(workdir, "source"), "--mem-queue-size=10000000").start()
        self.destination = nsqd_process(os.path.join(workdir, "destination"), "--mem-queue-size=10000000").start()
        self.runs = 0

    def close(self) -> None:
        self.source.stop()
        self.destination.stop()

    def topic(self, name: str) -> str:
        self.runs += 1
        return f"{name}_{self.runs}"

    def to_nsq(self, impl: str) -> float | None:
        topic = self.topic("to_nsq")
        argv = command(impl, "to_nsq", self.args.reference, f"--topic={topic}",
                       f"--nsqd-tcp-address={self.source.tcp_address}")
        if argv is None:
            return None
        path = os.path.join(self.workdir, "lines.txt")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write((self.body[:-1] + b"\n") * self.args.messages)
        with open(path, "rb") as stdin:
            started = time.monotonic()
            subprocess.run(argv, stdin=stdin, stderr=subprocess.DEVNULL, check=True, timeout=600)
        return self.args.messages / (time.monotonic() - started)

    def nsq_tail(self, impl: str) -> float | None:
        topic = self.topic("tail")
        argv = command(impl, "nsq_tail", self.args.reference, f"--topic={topic}",
                       f"--nsqd-tcp-address={self.source.tcp_address}", "--channel=tail", f"-n={self.args.messages}")
        if argv is None:
            return None
        preload(self.source, topic, self.args.messages, self.body)
        started = time.monotonic()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=600)
        return self.args.messages / (time.monotonic() - started)

    def nsq_to_file(self, impl: str, max_in_flight: int = 200, *flags: str) -> float | None:
        topic = self.topic("file")
        out = os.path.join(self.workdir, topic)
        argv = command(impl, "nsq_to_file", self.args.reference, f"--topic={topic}",
                       f"--nsqd-tcp-address={self.source.tcp_address}", f"--output-dir={out}",
                       f"--max-in-flight={max_in_flight}", *flags)
        if argv is None:
            return None
        preload(self.source, topic, self.args.messages, self.body)
        # the last partial batch waits for --sync-interval (30 s) in both tools: the bulk is what counts
        bulk = self.args.messages - max_in_flight
        seconds = timed_consumer(argv, self.source, topic, "nsq_to_file", bulk, 600)
        shutil.rmtree(out, ignore_errors=True)
        return bulk / seconds

    def nsq_to_nsq(self, impl: str) -> float | None:
        topic = self.topic("bridge")
        argv = command(impl, "nsq_to_nsq", self.args.reference, f"--topic={topic}",
                       f"--nsqd-tcp-address={self.source.tcp_address}",
                       f"--destination-nsqd-tcp-address={self.destination.tcp_address}")
        if argv is None:
            return None
        preload(self.source, topic, self.args.messages, self.body)
        return self.args.messages / timed_consumer(argv, self.source, topic, "nsq_to_nsq", self.args.messages, 600)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000, help="messages per run (default 200000)")
    parser.add_argument("--size", type=int, default=200, help="message size in bytes (default 200)")
    parser.add_argument("--reference", default=REFERENCE, help="folder of NSQ's Go binaries")
    args = parser.parse_args(argv)
    cases = [
        ("to_nsq (lines/s from a file)", 100_000, lambda b, impl: b.to_nsq(impl)),
        ("nsq_tail (lines/s to /dev/null)", 100_000, lambda b, impl: b.nsq_tail(impl)),
        ("nsq_to_file (msgs/s, default flags)", 100_000, lambda b, impl: b.nsq_to_file(impl)),
        ("nsq_to_file --max-in-flight=2500", 100_000, lambda b, impl: b.nsq_to_file(impl, 2500)),
        ("nsq_to_file --gzip --max-in-flight=2500", None,
         lambda b, impl: b.nsq_to_file(impl, 2500, "--gzip")),
        ("nsq_to_nsq (msgs/s)", 50_000, lambda b, impl: b.nsq_to_nsq(impl)),
    ]
    with tempfile.TemporaryDirectory(prefix="tools-bench-") as workdir:
        bench = Bench(args, workdir)
        try:
            print(f"{args.messages} messages of {args.size} bytes; nsqpy's nsqd; shared machine, noisy figures\n")
            print(f"| {'case':<42} | {'target':>8} | {'nsqpy':>9} | {'NSQ (Go)':>9} | {'ratio':>6} |")
            print(f"|{'-' * 44}|{'-' * 10}|{'-' * 11}|{'-' * 11}|{'-' * 8}|")
            for name, target, run in cases:
                ours, go = run(bench, "nsqpy"), run(bench, "go")
                ratio = f"{ours / go:.1f}x" if go else "-"
                print(f"| {name:<42} | {target or '-':>8} | {ours:>9,.0f} | "
                      f"{'absent' if go is None else format(go, ',.0f'):>9} | {ratio:>6} |", flush=True)
        finally:
            bench.close()


if __name__ == "__main__":
    main()
