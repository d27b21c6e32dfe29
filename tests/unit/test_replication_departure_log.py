"""The members a replicated nsqd saw leave, as its /stats lists them
(nsqd/replication/departure_log.py and departures.py's look)."""

import asyncio

from nsqpy.nsqd.replication.departure_log import KEPT, OWNER_READS, DepartureLog
from nsqpy.nsqd.replication.departures import Departures
from nsqpy.nsqd.replication.membership import Owner


def test_a_look_names_the_epochs_gone_since_the_last_one_a_restart_included():
    departures = Departures(copies=1, grace=5, clock=lambda: 0.0)
    assert departures.look({"a:1": 10, "b:1": 20, "c:1": 30}) == []
    assert departures.look({"a:1": 11, "c:1": 30}) == [("a:1", 10), ("b:1", 20)]


def test_owners_are_asked_a_few_per_look_least_asked_first_and_kept_once_known():
    log = DepartureLog(clock=lambda: 1000.0)
    for epoch in range(OWNER_READS + 2):
        log.left("a:1", epoch)
    owners = {("a:1", 0): Owner("b:1", 7)}
    asked = []

    async def owner_of(node, epoch):
        asked.append(epoch)
        return owners.get((node, epoch))

    asyncio.run(log.find_owners(owner_of))
    asyncio.run(log.find_owners(owner_of))
    assert asked == [*range(OWNER_READS), OWNER_READS, OWNER_READS + 1, 1, 2]
    entries = log.entries(lambda key: 5 if key == ("a:1", 0) else 0)
    assert entries[-1] == {"node": "a:1", "epoch": 0, "left_at": 1000.0, "taken_over_by": "b:1",
                           "messages_adopted": 5}
    assert [entry["epoch"] for entry in entries] == list(range(OWNER_READS + 1, -1, -1))  # newest first


def test_only_the_last_departures_are_kept():
    log = DepartureLog()
    for epoch in range(KEPT + 3):
        log.left("a:1", epoch)
    assert [entry["epoch"] for entry in log.entries(lambda key: 0)][-1] == 3
