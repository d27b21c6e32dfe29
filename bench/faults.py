"""Random fault schedules against replicated nsqd, back to back, for as
long as asked: the fault suite of tests/replication/test_faults.py run
long, where a rare interleaving has time to turn up.

    python bench/faults.py [--minutes 30] [--seed 1] [--nodes 3] [--factor 2] [--schedule-seconds 60]
                           [--failures kill,freeze,stop,cut-etcd,cut-clients]

Each schedule starts a fresh cluster (etcd, nsqlookupd, ``--nodes`` nsqd
fronted by proxies, R=``--factor``, a 3 s lease) under raw V2, HTTP and
gnsq publishers and consumers found through nsqlookupd, draws its faults
from seed, seed+1, ... within what docs/guarantees.md promises (failures
one after another, each noticed: tests/replication/faults/schedule.py),
heals everything and drains. Prints each schedule's table, then one line
per schedule and the totals: acknowledged, lost, delivered twice,
delivered by two nodes, and what a node cut from etcd acknowledged after
its lease. Exits 1 if anything acknowledged was lost.
Needs etcd (Debian's etcd-server; `make test` installs it).
"""

import argparse
import contextlib
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # the fault suite lives under tests/

from tests.replication.faults.checker import total  # noqa: E402
from tests.replication.faults.cluster import FaultCluster  # noqa: E402
from tests.replication.faults.faults import RECOVERIES  # noqa: E402
from tests.replication.faults.run import run_schedule  # noqa: E402
from tests.replication.faults.schedule import random_schedule  # noqa: E402

COLUMNS = ("seed", "acknowledged", "lost", "delivered twice", "by two nodes", "acked while fenced", "seconds")


def run_one(seed: int, args) -> tuple:
    schedule = random_schedule(random.Random(seed), args.nodes, args.factor, args.schedule_seconds, args.failures)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nsqpy-faults-") as folder, contextlib.ExitStack() as stack:
        cluster = FaultCluster(stack, Path(folder), args.nodes, args.factor, fronted=True)
        outcome = run_schedule(cluster, schedule, quiet=60, bound=300)
    print(outcome.report(f"seed {seed}"), flush=True)
    summed = total(outcome.rows)
    return (seed, summed.acknowledged, summed.lost, summed.delivered_twice, summed.by_two_nodes,
            outcome.acked_while_fenced(), round(time.monotonic() - began))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="start schedules for this long (default 30)")
    parser.add_argument("--seed", type=int, default=1, help="the first schedule's seed; the next ones follow")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--factor", type=int, default=2, help="--replication-factor")
    parser.add_argument("--schedule-seconds", type=float, default=60.0, help="faults begin within this span")
    parser.add_argument("--failures", type=lambda text: tuple(text.split(",")), default=tuple(RECOVERIES),
                        help=f"drawn from (default all): {','.join(RECOVERIES)}")
    args = parser.parse_args()
    unknown = set(args.failures) - set(RECOVERIES)
    if unknown:
        parser.error(f"unknown failures {sorted(unknown)}: choose from {','.join(RECOVERIES)}")
    deadline = time.monotonic() + args.minutes * 60
    results = []
    seed = args.seed
    while not results or time.monotonic() < deadline:
        results.append(run_one(seed, args))
        seed += 1
    rows = [COLUMNS, *results, ("total", *(sum(column) for column in list(zip(*results))[1:]))]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(COLUMNS))]
    print("\n".join("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)) for row in rows))
    return 1 if any(result[2] for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
