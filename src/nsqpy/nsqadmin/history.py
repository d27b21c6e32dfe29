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

The summary's rates are those of the last sample interval, the charts'
last point: a person reads them as "now", and a longer average still shows
traffic that stopped a minute ago. The time to drain is only estimated for a
depth that is shrinking or steady: while it grows (more comes in than goes
out) no pace empties it, so the summary says ``growing`` with the net change
per second instead. Depth that cannot leave is kept apart, or it would make
every estimate infinite: ``paused_depth`` (a paused channel's, a paused
topic's own) and ``unconsumed_depth`` (a channel's with no consumer
connected, a topic's own while it has no channel to go to). Both are left
out of the estimate and of the trend, and named instead.
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
    unconsumed_depth: int = 0  # of depth: what waits where no consumer takes it

    @property
    def waiting(self) -> int:
        """The depth that can leave: the time to drain is this one's."""
        return self.depth - self.paused_depth - self.unconsumed_depth


def _add(totals: dict, key: tuple, *values: int) -> None:
    old = totals.get(key, (0,) * len(values))
    totals[key] = tuple(a + b for a, b in zip(old, values))


def totals_by_key(node_topics: list[list[dict]]) -> dict[tuple, tuple]:
    """(topic,) and (topic, channel) -> summed (message_count, depth, in_flight, deferred, out)."""
    return tally(node_topics)[0]


def _stuck_depth(depth: int, paused: bool, has_way_out: bool) -> tuple[int, int]:
    """One queue's depth that cannot leave, as (paused, unconsumed): all of
    it while the queue is paused, else all of it while nothing takes from it
    (no consumer on a channel, no channel on a topic), else none."""
    if paused:
        return depth, 0
    return (0, 0) if has_way_out else (0, depth)


def tally(node_topics: list[list[dict]]) -> tuple[dict[tuple, tuple], dict[tuple, tuple]]:
    """``totals_by_key``, and per key the depth that cannot leave as
    (paused, unconsumed), for the keys that have some. A channel's counts
    in its topic's too."""
    totals: dict[tuple, tuple] = {}
    stuck: dict[tuple, tuple] = {}
    for topics in node_topics:
        for topic in topics:
            name = topic["topic_name"]
            _add(totals, (name,), topic["message_count"], topic["depth"], 0, 0, 0)
            _add(stuck, (name,), *_stuck_depth(topic["depth"], topic["paused"], bool(topic["channels"])))
            for channel in topic["channels"]:
                held = (channel["depth"], channel["in_flight_count"], channel["deferred_count"])
                out = channel["message_count"] - sum(held)
                _add(totals, (name, channel["channel_name"]), channel["message_count"], *held, out)
                _add(totals, (name,), 0, *held, out)
                channel_stuck = _stuck_depth(channel["depth"], channel["paused"], channel["client_count"] > 0)
                _add(stuck, (name, channel["channel_name"]), *channel_stuck)
                _add(stuck, (name,), *channel_stuck)
    return totals, {key: value for key, value in stuck.items() if any(value)}


def _rate(before: int, after: int, seconds: float) -> float:
    return max(0, after - before) / seconds if seconds > 0 else 0.0


def _net_rate(first: Sample, last: Sample) -> float:
    """How fast the depth that can leave changed between two samples (per
    second; negative while it shrinks)."""
    seconds = last.at - first.at
    return (last.waiting - first.waiting) / seconds if seconds > 0 else 0.0


def _drain_seconds(waiting: int, rate_out: float) -> float | None:
    """``waiting`` at the pace going out: 0 for nothing waiting; None when
    nothing leaves."""
    if waiting <= 0:
        return 0.0
    return waiting / rate_out if rate_out > 0 else None


def _point(before: Sample, after: Sample) -> dict:
    """A chart's point: the levels at ``after``, the rates since ``before``."""
    seconds = after.at - before.at
    return {"t": round(after.at, 3), "depth": after.depth, "in_flight": after.in_flight, "deferred": after.deferred,
            "rate_in": round(_rate(before.message_count, after.message_count, seconds), 3),
            "rate_out": round(_rate(before.out, after.out, seconds), 3)}


def _trend(before: Sample | None, last: Sample | None) -> dict:
    """The rates of the last interval (the charts' last point; None before
    two samples), the net change per second over it of the depth that can
    leave and whether that depth is ``growing`` (by more than one interval
    of what goes out: a consumer that keeps up leaves a little for a
    moment), and the time to drain it at the pace going out (None: not
    known yet, growing, or nothing leaving)."""
    if before is None:
        return {"rate_in": None, "rate_out": None, "net_rate": None, "growing": False, "drain_seconds": None}
    point = _point(before, last)
    net = _net_rate(before, last)
    growing = net > 0 and last.waiting > point["rate_out"] * (last.at - before.at)
    return {"rate_in": point["rate_in"], "rate_out": point["rate_out"], "net_rate": net, "growing": growing,
            "drain_seconds": None if growing else _drain_seconds(last.waiting, point["rate_out"])}


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

    def record(self, at: float, totals: dict[tuple, tuple], stuck: dict[tuple, tuple] | None = None) -> None:
        """Append a sample per key; keys gone from the cluster are forgotten.
        ``stuck``: (paused, unconsumed) depth of the keys that have some."""
        for key in list(self._series):
            if key not in totals:
                del self._series[key]
        for key, values in totals.items():
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = collections.deque(maxlen=self._depth)
            series.append(Sample(at, *values, *(stuck or {}).get(key, (0, 0))))

    def _samples(self, topic: str, channel: str | None) -> list[Sample]:
        return list(self._series.get((topic,) if channel is None else (topic, channel), ()))

    def points(self, topic: str, channel: str | None = None) -> list[dict]:
        """One point per pair of consecutive samples: levels at the later one,
        rates over the interval between them (messages per second)."""
        samples = self._samples(topic, channel)
        return [_point(before, after) for before, after in zip(samples, samples[1:])]

    def summary(self, topic: str, channel: str | None = None) -> dict:
        """The last depth sampled (``paused_depth`` and ``unconsumed_depth``
        of it cannot leave) and what ``_trend`` says of the last interval."""
        samples = self._samples(topic, channel)
        if not samples:
            return {"depth": None, "paused_depth": 0, "unconsumed_depth": 0, **_trend(None, None)}
        last = samples[-1]
        return {"depth": last.depth, "paused_depth": last.paused_depth, "unconsumed_depth": last.unconsumed_depth,
                **_trend(samples[-2] if len(samples) > 1 else None, last)}

    def answer(self, topic: str, channel: str | None = None) -> dict:
        """``/api/history/...``: everything a chart needs."""
        return {"topic_name": topic, "channel_name": channel or "", "interval": self.interval,
                "retention": self.retention, **self.summary(topic, channel),
                "points": self.points(topic, channel)}
