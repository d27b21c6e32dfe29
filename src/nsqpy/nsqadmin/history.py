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

The time to drain is only estimated for a depth that is shrinking or
steady: while it grows (more comes in than goes out) no pace empties it, so
the summary says ``growing`` with the net change per second instead. Depth
that cannot leave (a paused channel's, a paused topic's own) is kept apart
as ``paused_depth``: it is left out of the estimate and of the trend, or the
paused queue would make every estimate infinite.
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
    paused_depth: int = 0  # of depth: what waits where it cannot leave (paused)


def _add(totals: dict, key: tuple, *values: int) -> None:
    old = totals.get(key, (0,) * len(values))
    totals[key] = tuple(a + b for a, b in zip(old, values))


def totals_by_key(node_topics: list[list[dict]]) -> dict[tuple, tuple]:
    """(topic,) and (topic, channel) -> summed (message_count, depth, in_flight, deferred, out)."""
    return tally(node_topics)[0]


def tally(node_topics: list[list[dict]]) -> tuple[dict[tuple, tuple], dict[tuple, int]]:
    """``totals_by_key``, and per key the depth that is paused: a paused
    channel's depth (counted in its topic's too), a paused topic's own."""
    totals: dict[tuple, tuple] = {}
    paused: dict[tuple, int] = {}
    for topics in node_topics:
        for topic in topics:
            name = topic["topic_name"]
            _add(totals, (name,), topic["message_count"], topic["depth"], 0, 0, 0)
            _add(paused, (name,), topic["depth"] if topic["paused"] else 0)
            for channel in topic["channels"]:
                held = (channel["depth"], channel["in_flight_count"], channel["deferred_count"])
                out = channel["message_count"] - sum(held)
                _add(totals, (name, channel["channel_name"]), channel["message_count"], *held, out)
                _add(totals, (name,), 0, *held, out)
                stuck = channel["depth"] if channel["paused"] else 0
                _add(paused, (name, channel["channel_name"]), stuck)
                _add(paused, (name,), stuck)
    return totals, {key: value for (key, (value,)) in paused.items() if value}


def _rate(before: int, after: int, seconds: float) -> float:
    return max(0, after - before) / seconds if seconds > 0 else 0.0


def _net_rate(first: Sample, last: Sample) -> float:
    """How fast the depth that can leave changed between two samples (per
    second; negative while it shrinks)."""
    seconds = last.at - first.at
    change = (last.depth - last.paused_depth) - (first.depth - first.paused_depth)
    return change / seconds if seconds > 0 else 0.0


def _drain_seconds(waiting: int, rate_out: float | None) -> float | None:
    """``waiting`` at the pace going out: 0 for nothing waiting; None when
    the pace is not known yet or nothing leaves."""
    if rate_out is None:
        return None
    if waiting <= 0:
        return 0.0
    return waiting / rate_out if rate_out > 0 else None


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
        self.record(time.time(), *tally(list(self._last_by_node.values())))

    def record(self, at: float, totals: dict[tuple, tuple], paused: dict[tuple, int] | None = None) -> None:
        """Append a sample per key; keys gone from the cluster are forgotten.
        ``paused``: the paused depth of the keys that have some."""
        for key in list(self._series):
            if key not in totals:
                del self._series[key]
        for key, values in totals.items():
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = collections.deque(maxlen=self._depth)
            series.append(Sample(at, *values, (paused or {}).get(key, 0)))

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
        """The last depth sampled (``paused_depth`` of it cannot leave), rates
        over the last minute or so, the net change per second of the depth
        that can leave and whether it is ``growing``, and the time to drain
        that depth at the pace going out (None: not known yet, growing, or
        nothing leaving)."""
        samples = list(self._series.get((topic,) if channel is None else (topic, channel), ()))
        points = self.points(topic, channel)
        recent = points[-max(1, int(60 / self.interval)):] if self.enabled else []
        rate_in = sum(p["rate_in"] for p in recent) / len(recent) if recent else None
        rate_out = sum(p["rate_out"] for p in recent) / len(recent) if recent else None
        last = samples[-1] if samples else None
        net = _net_rate(samples[-len(recent) - 1], last) if recent else None
        waiting = last.depth - last.paused_depth if last else 0
        growing = net is not None and net > 0 and waiting > (rate_out or 0) * self.interval
        return {"depth": last.depth if last else None, "paused_depth": last.paused_depth if last else 0,
                "rate_in": rate_in, "rate_out": rate_out, "net_rate": net, "growing": growing,
                "drain_seconds": _drain_seconds(waiting, rate_out) if last and not growing else None}

    def answer(self, topic: str, channel: str | None = None) -> dict:
        """``/api/history/...``: everything a chart needs."""
        return {"topic_name": topic, "channel_name": channel or "", "interval": self.interval,
                "retention": self.retention, **self.summary(topic, channel),
                "points": self.points(topic, channel)}
