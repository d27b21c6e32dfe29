"""How long a consumer backs off after failures (go-nsq's two strategies)."""

import random


def backoff_duration(strategy: str, multiplier: float, attempt: int) -> float:
    """``exponential``: multiplier * 2**attempt; ``full_jitter``: uniform in [0, that)."""
    ceiling = multiplier * (2 ** attempt)
    if strategy == "full_jitter":
        return random.uniform(0, ceiling)
    return ceiling
