"""Stats history for the charts Go's nsqadmin draws only with Graphite.

Every ``--history-interval`` the sampler reads every nsqd's ``/stats``
(without clients), sums each topic and each channel over the nodes, and
keeps ``--history-retention`` worth of samples in memory. Rates are derived
when asked for, from the counters of consecutive samples:

* in: growth of ``message_count`` (published to the topic, or put on the channel);
* out: growth of what has left a channel, i.e. its ``message_count`` minus
  what it still holds (depth, in flight, deferred): what consumers finished
  (or what was emptied). A topic's out is the sum over its channels, and its
  depth, in flight and deferred count what waits in the topic and in every
  channel, so depth / out is the time to drain everything queued.

A counter that goes down (an nsqd restarted) counts as no traffic, not as a
negative rate. A node that misses a sample keeps its last figures, so one
slow answer does not draw a dip in the totals.
"""

import asyncio
import collections
import dataclasses
import time

from .cluster import AllFailed
from .upstream import UpstreamError


@dataclasses.dataclass(frozen=True)
class Sample:
    at: float
    message_count: int
    depth: int
    in_flight: int
    deferred: int
    out: int  # messages that have left (a counter)


def _add(totals: dict, key: tuple, *values: int) -> None:
    old = totals.get(key, (0, 0, 0, 0, 0))
    totals[key] = tuple(a + b for a, b in zip(old, values))


def totals_by_key(node_topics: list[list[dict]]) -> dict[tuple, tuple]:
    """(topic,) and (topic, channel) -> summed (message_count, depth, in_flight, deferred, out)."""
    totals: dict[tuple, tuple] = {}
    for topics in node_topics:
        for topic in topics:
            name = topic["topic_name"]
            _add(totals, (name,), topic["message_count"], topic["depth"], 0, 0, 0)
            for channel in topic["channels"]:
                held = (channel["depth"], channel["in_flight_count"], channel["deferred_count"])
                out = channel["message_count"] - sum(held)
                _add(totals, (name, channel["channel_name"]), channel["message_count"], *held, out)
                _add(totals, (name,), 0, *held, out)
    return totals


def _rate(before: int, after: int, seconds: float) -> float:
    return max(0, after - before) / seconds if seconds > 0 else 0.0


class StatsHistory:
    def __init__(self, cluster, interval: float, retention: float, log):
        self.cluster = cluster
        self.interval = interval
        self.retention = retention
        self.log = log
        self._series: dict[tuple, collections.deque] = {}
        self._last_by_node: dict[str, list[dict]] = {}
        self._task: asyncio.Task | None = None
        self._last_problem = ""
        self._depth = max(2, int(retention / interval) + 1) if interval > 0 else 0

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def start(self) -> None:
        if self.enabled:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            try:
                await self.sample()
                self._report("")
            except (AllFailed, UpstreamError) as error:
                self._report(str(error))
            except Exception:
                self.log.exception("history: sampling failed")
            next_at = max(next_at + self.interval, loop.time())
            await asyncio.sleep(next_at - loop.time())

    def _report(self, problem: str) -> None:
        """Log a cluster that stopped answering once per outage, not every round."""
        if problem and not self._last_problem:
            self.log.warning("history: no stats, the charts pause until the cluster answers: %s", problem)
        elif self._last_problem and not problem:
            self.log.info("history: sampling stats again")
        self._last_problem = problem

    async def sample(self) -> None:
        """Read every node once and append one sample per topic and channel."""
        producers, errors = await self.cluster.producers()
        stats, stats_errors = await self.cluster.node_stats(producers, include_clients=False)
        for error in errors + stats_errors:
            self.log.debug("history: %s", error)
        nodes = {p.node for p in producers}
        self._last_by_node = {node: stats.get(node, self._last_by_node.get(node, [])) for node in nodes}
        self.record(time.time(), totals_by_key(list(self._last_by_node.values())))

    def record(self, at: float, totals: dict[tuple, tuple]) -> None:
        """Append a sample per key; keys gone from the cluster are forgotten."""
        for key in list(self._series):
            if key not in totals:
                del self._series[key]
        for key, values in totals.items():
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = collections.deque(maxlen=self._depth)
            series.append(Sample(at, *values))

    def points(self, topic: str, channel: str | None = None) -> list[dict]:
        """One point per pair of consecutive samples: levels at the later one,
        rates over the interval between them (messages per second)."""
        samples = list(self._series.get((topic,) if channel is None else (topic, channel), ()))
        points = []
        for before, after in zip(samples, samples[1:]):
            seconds = after.at - before.at
            points.append({"t": round(after.at, 3), "depth": after.depth, "in_flight": after.in_flight,
                           "deferred": after.deferred,
                           "rate_in": round(_rate(before.message_count, after.message_count, seconds), 3),
                           "rate_out": round(_rate(before.out, after.out, seconds), 3)})
        return points

    def summary(self, topic: str, channel: str | None = None) -> dict:
        """The last depth sampled, rates over the last minute or so, and the
        time to drain at that pace (None: not known yet, or never at this pace)."""
        samples = self._series.get((topic,) if channel is None else (topic, channel))
        depth = samples[-1].depth if samples else None
        points = self.points(topic, channel)
        recent = points[-max(1, int(60 / self.interval)):] if self.enabled else []
        rate_in = sum(p["rate_in"] for p in recent) / len(recent) if recent else None
        rate_out = sum(p["rate_out"] for p in recent) / len(recent) if recent else None
        if depth is None or rate_out is None:
            drain = None
        elif depth == 0:
            drain = 0.0
        else:
            drain = depth / rate_out if rate_out > 0 else None
        return {"depth": depth, "rate_in": rate_in, "rate_out": rate_out, "drain_seconds": drain}

    def answer(self, topic: str, channel: str | None = None) -> dict:
        """``/api/history/...``: everything a chart needs."""
        return {"topic_name": topic, "channel_name": channel or "", "interval": self.interval,
                "retention": self.retention, **self.summary(topic, channel),
                "points": self.points(topic, channel)}
