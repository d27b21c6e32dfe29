"""``--status-every N``: after each N requests, one log line with their
99th and 95th percentile and mean duration (NSQ's tools print the same)."""


class StatusEvery:
    def __init__(self, every: int, prefix: str, log):
        self.every = every
        self.prefix = prefix
        self._log = log
        self._durations: list[float] = []

    def record(self, seconds: float, count: int = 1) -> None:
        """``count`` requests that took ``seconds`` each (a batch answered at once)."""
        if self.every <= 0:
            return
        self._durations.extend([seconds] * count)
        while len(self._durations) >= self.every:
            window = sorted(self._durations[:self.every])
            del self._durations[:self.every]
            ms = [d * 1000 for d in window]
            self._log.info("%s finished %d requests - 99th: %.02fms - 95th: %.02fms - avg: %.02fms",
                           self.prefix, self.every, _percentile(ms, 0.99), _percentile(ms, 0.95),
                           sum(ms) / len(ms))


def _percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]
