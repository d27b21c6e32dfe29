"""A schedule is a list of steps, each a fault applied to one node some
seconds after the schedule starts; ``random_schedule`` draws one from a
seed, within the promise of docs/guarantees.md: with R copies, nothing
acknowledged is lost "while each failure is noticed (one lease) before
the next". So a drawn schedule keeps

- every step at least ``NOTICED`` after the one before it: the lease of
  a node that failed has ended and the members have been looked at again
  (a takeover claimed, the dead node's successors changed and copied
  what it held) before anything else happens; a recovery is such a step
  too, as a node that joins changes its neighbours' successors;
- at most ``nodes - factor`` nodes out at once, so that R nodes are left
  to hold every publish;
- every failure ended by the schedule itself (a restart, a heal, a thaw),
  no sooner than ``NOTICED`` after it: a freeze outlasts the lease.
"""

import random
from dataclasses import dataclass

from .cluster import LEASE
from .faults import RECOVERIES

#: a lease, and a look at the members after it (they are read every 0.5 s)
NOTICED = LEASE + 2.0


@dataclass(frozen=True)
class Step:
    at: float  # seconds after the schedule starts
    fault: str  # a key of Faults.actions
    node: int


def random_schedule(rng: random.Random, nodes: int, factor: int, duration: float,
                    failures: tuple[str, ...] = tuple(RECOVERIES)) -> list[Step]:
    """Failures drawn from ``failures`` for about ``duration`` seconds, each
    ended within the schedule (which may run up to 3 NOTICED past it)."""
    steps: list[Step] = []
    out: dict[int, tuple[float, str]] = {}  # node -> (when it is due back, the failure)
    at = rng.uniform(0, NOTICED)
    while at < duration or out:
        due = min(out.items(), key=lambda item: item[1][0], default=None)
        if due is not None and (len(out) >= nodes - factor or due[1][0] <= at or at >= duration):
            node, (back, failure) = due
            at = max(at, back)
            steps.append(Step(at, rng.choice(RECOVERIES[failure]), node))
            del out[node]
        else:
            node = rng.choice([n for n in range(nodes) if n not in out])
            failure = rng.choice(failures)
            steps.append(Step(at, failure, node))
            out[node] = (at + rng.uniform(NOTICED, 3 * NOTICED), failure)
        at += rng.uniform(NOTICED, 2 * NOTICED)
    return steps


def describe(steps: list[Step]) -> str:
    return ", ".join(f"{step.at:.1f}s {step.fault} {step.node}" for step in steps)
