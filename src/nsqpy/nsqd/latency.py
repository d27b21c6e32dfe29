"""End-to-end processing latency (publish to FIN) quantiles per channel.

Like nsqd, the window is two halves: samples go into the current half, and
every half window the older half is dropped, so a query covers between one
half and one whole window. Each half keeps at most ``max_samples`` (a
uniform reservoir sample), so memory stays bounded whatever the FIN rate.
"""

import random
import time


class LatencyWindow:
    __slots__ = ("half", "quantiles", "max_samples", "current", "previous",
                 "current_count", "previous_count", "rotates_at")

    def __init__(self, window: float, quantiles: list[float], max_samples: int = 5000):
        self.half = window / 2
        self.quantiles = sorted(quantiles, reverse=True)
        self.max_samples = max_samples
        self.current: list[int] = []
        self.previous: list[int] = []
        self.current_count = 0
        self.previous_count = 0
        self.rotates_at = time.monotonic() + self.half

    def add(self, latency_ns: int) -> None:
        self._rotate()
        self.current_count += 1
        if len(self.current) < self.max_samples:
            self.current.append(latency_ns)
        else:
            slot = random.randrange(self.current_count)
            if slot < self.max_samples:
                self.current[slot] = latency_ns

    def _rotate(self) -> None:
        now = time.monotonic()
        if now < self.rotates_at:
            return
        if now - self.rotates_at >= self.half:  # idle for a whole half or more
            self.previous, self.previous_count = [], 0
        else:
            self.previous, self.previous_count = self.current, self.current_count
        self.current, self.current_count = [], 0
        self.rotates_at = now + self.half

    def samples(self) -> tuple[int, list[int]]:
        self._rotate()
        return self.current_count + self.previous_count, self.current + self.previous


def summarize(windows, quantiles: list[float]) -> dict:
    """NSQ's ``{"count": N, "percentiles": [{"quantile": q, "value": ns}]}``
    over one or more windows (a topic merges its channels)."""
    count = 0
    samples: list[int] = []
    for window in windows:
        n, s = window.samples()
        count += n
        samples += s
    if not quantiles:
        return {"count": 0, "percentiles": None}
    samples.sort()
    percentiles = []
    for q in sorted(quantiles, reverse=True):
        value = samples[min(len(samples) - 1, max(0, int(q * len(samples) + 0.5) - 1))] if samples else 0
        percentiles.append({"quantile": q, "value": value})
    return {"count": count, "percentiles": percentiles}
