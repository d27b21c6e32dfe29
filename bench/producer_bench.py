"""The Producer over many nsqd: throughput against one node, and failover time.

    python bench/producer_bench.py [--runfor 5] [--rounds 20] [--in-flight 8]

Throughput: MPUB batches of 200 x 200-byte messages, ``--in-flight`` calls at once, for
``--runfor`` seconds each: a single-node Producer against one nsqd, one
Producer over three nsqd, and the same with ``replicas=2`` (messages
acknowledged by both copies). Failover: a sticky Producer publishing one
message at a time to node A; A is killed (SIGKILL) or frozen (SIGSTOP) and
the time from then to the first publish acknowledged by another node is
measured, ``--rounds`` times each.
"""

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import statistics
import tempfile
import time

from nsqpy.client import Producer
from nsqpy.localcluster import nsqd_process

BODY = b"x" * 200
BATCH = [BODY] * 200
FLAGS = ("--mem-queue-size=10000000",)


async def throughput(producer: Producer, runfor: float, in_flight: int) -> float:
    sent = 0
    deadline = time.monotonic() + runfor

    async def caller():
        nonlocal sent
        while time.monotonic() < deadline:
            await producer.multi_publish("bench", BATCH)
            sent += len(BATCH)

    started = time.monotonic()
    await asyncio.gather(*(caller() for _ in range(in_flight)))
    return sent / (time.monotonic() - started)


async def failover_once(addresses: list[str], victim, freeze: bool, node_timeout: float) -> float:
    """Seconds from the victim's death (or freeze) to the next publish acknowledged elsewhere."""
    async with Producer(addresses, sticky=True, node_timeout=node_timeout) as producer:
        await producer.publish("failover", b"warm")  # sticky: the topic is on addresses[0], the victim
        if freeze:
            os.kill(victim.process.pid, signal.SIGSTOP)
        else:
            victim.kill()
        died = time.monotonic()
        await producer.publish("failover", b"after")
        elapsed = time.monotonic() - died
        assert not producer.stats()[addresses[0]].up
        return elapsed


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"


@contextlib.contextmanager
def fresh_nodes(count: int):
    """``count`` new nsqd: each measurement starts on empty ones (a node holding
    millions of messages is slower, which would favour whatever ran first)."""
    with tempfile.TemporaryDirectory() as data, contextlib.ExitStack() as running:
        nodes = []
        for i in range(count):
            os.makedirs(f"{data}/n{i}")
            nodes.append(running.enter_context(nsqd_process(f"{data}/n{i}", *FLAGS)))
        yield nodes, data


def measure_throughput(runfor: float, in_flight: int) -> None:
    setups = [
        ("one nsqd, single-node Producer", 1, lambda addresses: Producer(addresses[0])),
        ("three nsqd, one Producer (round-robin)", 3, lambda addresses: Producer(addresses)),
        ("three nsqd, replicas=2", 3, lambda addresses: Producer(addresses, replicas=2)),
    ]
    results = {}
    for label, count, make in setups:
        with fresh_nodes(count) as (nodes, _):
            async def run():
                async with make([node.tcp_address for node in nodes]) as producer:
                    return await throughput(producer, runfor, in_flight)

            results[label] = asyncio.run(run())
        print(f"{label}: {results[label]:,.0f} msgs/s", flush=True)
    base = results[setups[0][0]]
    print("\n| publishing | msgs/s | vs single node |\n|---|---:|---:|")
    for label, rate in results.items():
        print(f"| {label} | {rate:,.0f} | {rate / base:.2f}x |")


def measure_failover(rounds: int) -> None:
    with fresh_nodes(3) as (nodes, data):
        addresses = [node.tcp_address for node in nodes]
        nodes[0].args.append(f"--tcp-address={addresses[0]}")  # restarts come back where they were
        for freeze, node_timeout in ((False, 3.0), (True, 1.0)):
            samples = []
            for _ in range(rounds):
                victim = nodes[0]
                samples.append(asyncio.run(failover_once(addresses, victim, freeze, node_timeout)))
                if freeze:
                    os.kill(victim.process.pid, signal.SIGCONT)
                else:
                    victim.start()
            what = f"SIGSTOP, node_timeout {node_timeout:g}s" if freeze else "SIGKILL"
            print(f"failover after {what}: {percentiles(samples)} ({rounds} rounds)", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runfor", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--in-flight", type=int, default=8)
    args = p.parse_args()
    logging.getLogger("nsqpy.client").setLevel(logging.ERROR)  # one warning per failover otherwise
    measure_throughput(args.runfor, args.in_flight)
    print()
    measure_failover(args.rounds)


if __name__ == "__main__":
    main()
