"""RDY over more nsqd than max_in_flight: every node gets its turn within a
bound, whatever the random choices (a fake clock, many seeds)."""

import random

import pytest

from nsqpy.client.config import Config
from nsqpy.client.flow import FlowController

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls

TICK = Config().rdy_redistribute_interval


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def first_turns(seed: int, busy: set[str], keys: str = "abc", until: float = 600.0) -> dict[str, float]:
    """Seconds until each connection first holds RDY, with the default Config
    and max_in_flight 1; the nsqd in ``busy`` always have a message for the
    holder (so it never idles), the others have none."""
    clock = Clock()
    start = clock.now
    flow = FlowController(Config(), clock, random.Random(seed))
    for key in keys:
        flow.added(key, 2500)
    turns: dict[str, float] = {}
    while clock.now - start < until and len(turns) < len(keys):
        for key, count in flow.ready_counts().items():
            if count:
                turns.setdefault(key, clock.now - start)
                if key in busy:
                    flow.received(key)
                    flow.finished(key)
        clock.now += TICK
        flow.tick()
    return turns


@pytest.mark.parametrize("busy", [{"a", "b", "c"}, {"a", "c"}], ids=["all busy", "one empty"])
def test_every_connection_holds_rdy_within_a_bound_whatever_the_random_choices(busy):
    """A holder keeps RDY 1 for low_rdy_timeout at most (30 s) while it has
    messages, low_rdy_idle_timeout (10 s) when it has none; the RDY then goes
    to the connection that has waited longest for it, so with 3 connections
    each has its turn within two holders' time (go-nsq picks at random,
    and a node could wait minutes)."""
    config = Config()
    bound = 2 * (config.low_rdy_timeout + 2 * TICK)
    for seed in range(200):
        turns = first_turns(seed, busy)
        assert set(turns) == {"a", "b", "c"}, (seed, turns)
        assert max(turns.values()) <= bound, (seed, turns)
