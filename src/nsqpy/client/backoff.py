"""How long a consumer backs off after failures (go-nsq's two strategies)."""

import random


def backoff_duration(strategy: str, multiplier: float, attempt: int) -> float:
    """``exponential``: multiplier * 2**attempt; ``full_jitter``: uniform in [0, that)."""
    # a level past 64 is past any max_backoff_duration; 2**1024 would not fit a float
    ceiling: float = multiplier * (2 ** min(attempt, 64))
    if strategy == "full_jitter":
        return random.uniform(0, ceiling)
    return ceiling
