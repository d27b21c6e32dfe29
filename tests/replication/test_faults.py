"""Fault schedules against replicated nsqd (three nodes, R=2, a 3 s lease)
under a workload of raw V2, HTTP and gnsq publishers and consumers that
find the nodes through nsqlookupd (tests/replication/faults/). Each
schedule must lose nothing acknowledged; what was delivered twice, or by
two nodes, is printed with the table."""

import contextlib
import random
import shutil

import pytest

from tests.replication.faults.cluster import FaultCluster
from tests.replication.faults.run import run_schedule
from tests.replication.faults.schedule import Step, random_schedule

pytestmark = [pytest.mark.replication, pytest.mark.timeout(240)]


@pytest.fixture
def fault_cluster(tmp_path):
    if shutil.which("etcd") is None:
        pytest.fail("etcd not found: `make test` installs Debian's etcd-server")
    with contextlib.ExitStack() as stack:
        yield lambda **options: FaultCluster(stack, tmp_path, **options)


def test_a_node_cut_from_etcd_stops_acknowledging_and_loses_nothing(fault_cluster):
    """etcd cut from node 0 for 15 s under load, then healed: the others
    take it over after its lease, so it must have stopped answering OK by
    then, and everything it acknowledged is delivered."""
    outcome = run_schedule(fault_cluster(), [Step(0, "cut-etcd", 0), Step(15, "heal-etcd", 0)])
    report = outcome.report("etcd cut from one node")
    print(report)
    assert (outcome.lost, outcome.acked_while_fenced()) == (0, 0), report


def test_an_origin_cut_from_etcd_whose_replica_then_itself_die_loses_nothing(fault_cluster):
    """etcd cut from node A; 6 s later A's replica (its successor) is
    killed, 7 s after that A itself: the third node delivers everything
    A acknowledged, whether before the cut or after."""
    cluster = fault_cluster()
    origin = 0
    replica = cluster.successor(origin)
    outcome = run_schedule(cluster, [Step(0, "cut-etcd", origin), Step(6, "kill", replica),
                                     Step(13, "kill", origin)])
    report = outcome.report(f"etcd cut from {origin}, its replica {replica} killed, then {origin}")
    print(report)
    assert outcome.lost == 0, report


def test_a_seeded_random_schedule_of_kills_freezes_and_restarts_loses_nothing(fault_cluster):
    """Seed 1: a freeze past the lease and a thaw, a kill -9 and a restart
    under new ports, each noticed before the next (schedule.py)."""
    cluster = fault_cluster(fronted=True)
    schedule = random_schedule(random.Random(1), nodes=3, factor=2, duration=20,
                               failures=("kill", "freeze", "stop"))
    outcome = run_schedule(cluster, schedule)
    report = outcome.report("seed 1")
    print(report)
    assert outcome.lost == 0, report
