"""One fault run: a cluster's topics and channels made on every node, the
workload started, the schedule's steps applied on time, everything
healed, the publishers stopped, the consumers drained, and the outcome
counted. Used by tests/replication/test_faults.py and bench/faults.py."""

import time
from dataclasses import dataclass

from .checker import Row, table
from .cluster import LEASE, FaultCluster
from .faults import Faults
from .publishers import Ack
from .schedule import Step, describe
from .workload import Workload

#: two topics, with two and three channels, and how long each channel's
#: consumer holds a message before its FIN: c1's keep some in flight always
#: a node cut from etcd acknowledges nothing from its cut plus a lease (when
#: a survivor may take it over) and a second for answers already on the way
FENCED_AFTER = LEASE + 1.0

CHANNELS = {"faults_a": {"c0": 0.0, "c1": 3.0}, "faults_b": {"c0": 0.0, "c1": 3.0, "c2": 0.0}}


@dataclass
class Outcome:
    rows: list[Row]
    acks: list[Ack]
    applied: list[tuple[float, Step]]  # each step with the wall time it was applied at
    healed_at: float  # the wall time everything still out was healed
    node_of_name: dict[str, int]
    drained_in: float  # seconds from the end of publishing to the last delivery waited for

    @property
    def lost(self) -> int:
        return sum(row.lost for row in self.rows)

    def acked_while_fenced(self) -> int:
        """Bodies a node cut from etcd acknowledged from ``FENCED_AFTER``
        its cut until it was healed: it must have stopped answering OK by
        then, as a survivor may own what it holds."""
        cut: dict[int, float] = {}
        windows = []
        for at, step in self.applied:
            if step.fault == "cut-etcd":
                cut[step.node] = at
            elif step.fault == "heal-etcd":
                windows.append((step.node, cut.pop(step.node), at))
        windows.extend((node, at, self.healed_at) for node, at in cut.items())
        return sum(1 for ack in self.acks for node, start, end in windows
                   if self.node_of_name.get(ack.node) == node and start + FENCED_AFTER <= ack.at <= end)

    def report(self, title: str) -> str:
        return (f"{title}: {describe([step for _, step in self.applied])}\n{table(self.rows)}\n"
                f"acknowledged by a node cut from etcd, from {FENCED_AFTER:g} s after its cut to its heal: "
                f"{self.acked_while_fenced()}; drained in {self.drained_in:.1f} s")


def run_schedule(cluster: FaultCluster, schedule: list[Step], *, lead: float = 3.0, tail: float = 3.0,
                 quiet: float = 30.0, bound: float = 90.0) -> Outcome:
    """``lead``: seconds of load before the first step; ``tail``: after the
    last one, before everything is healed; then until every acknowledged
    body is delivered, or ``quiet`` seconds without one more, or ``bound``."""
    cluster.wait_connected()
    for topic, channels in CHANNELS.items():
        for channel in channels:
            cluster.create_channel(topic, channel)
    faults = Faults(cluster)
    with Workload(cluster.lookupd.http_address, CHANNELS) as workload:
        workload.start(nodes=len(cluster.running))
        time.sleep(lead)
        began = time.monotonic()
        applied = []
        for step in sorted(schedule, key=lambda step: step.at):
            time.sleep(max(0.0, began + step.at - time.monotonic()))
            applied.append((time.time(), step))
            faults.apply(step.fault, step.node)
        time.sleep(tail)
        healed_at = time.time()
        faults.heal_all()
        workload.stop_publishing()
        drained_in = workload.wait_delivered(quiet, bound)
        return Outcome(workload.tally(lambda name: cluster.node_of_name.get(name, name)), workload.acks,
                       applied, healed_at, dict(cluster.node_of_name), drained_in)
