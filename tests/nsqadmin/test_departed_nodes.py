"""The nodes that left a replicated cluster, as nsqadmin lists them
(``/api/nodes``' ``departed``): merged from every survivor's /stats, and
listed until an admin user clears them."""

import pytest

from nsqpy.nsqadmin.aggregate import departed_nodes
from nsqpy.nsqadmin.departed import ClearedDepartures
from tests.nsqadmin.helpers import call, departed_rows, wait_taken_over
from tests.replication.conftest import killed_holding, replicated  # noqa: F401 - the fixture
from tests.support.wire import wait_until

ALICE = {"X-Forwarded-User": "alice"}


def seen(node: str, epoch: int, left_at: float, owner: str | None = None, adopted: int = 0) -> dict:
    return {"node": node, "epoch": epoch, "left_at": left_at, "taken_over_by": owner, "messages_adopted": adopted}


def test_departures_seen_by_several_survivors_are_one_row_each_newest_first():
    rows = departed_nodes([
        {"departed": [seen("a:1", 7, 100.5, "b:1", 40), seen("c:1", 9, 200.0)]},
        {"departed": [seen("a:1", 7, 100.0), seen("c:1", 9, 200.2, "c:1")]},
        None,  # an nsqd that does not replicate
    ])
    assert rows == [seen("c:1", 9, 200.0, "c:1"), seen("a:1", 7, 100.0, "b:1", 40)]


def test_cleared_departures_stay_hidden_and_later_ones_show():
    now = [1000.0]
    cleared = ClearedDepartures(clock=lambda: now[0])
    listed = [seen("a:1", 7, 990.0), seen("b:1", 8, 1003.0)]  # b's nsqd runs ahead of nsqadmin's clock
    cleared.clear(listed)
    later = seen("a:1", 11, 1001.0)
    assert cleared.visible([*listed, later]) == [later]


@pytest.mark.replication
def test_a_killed_nsqd_is_listed_until_an_admin_clears_it(replicated, start_admin, topic, notifications):
    cluster = replicated()
    admin = start_admin(f"--lookupd-http-address={cluster.lookupd.http_address}", "--admin-user=alice",
                        f"--notification-http-endpoint={notifications.url}")
    cluster.wait_connected()
    dead, epoch = killed_holding(cluster, 1, topic)
    row = wait_taken_over(admin, dead.tcp_address)
    assert row["epoch"] == epoch
    assert row["taken_over_by"] in {cluster.nsqds[0].tcp_address, cluster.nsqds[2].tcp_address}
    assert row["messages_adopted"] == 100

    assert call(admin, "POST", "/api/nodes/departed/clear") == (403, {"message": "FORBIDDEN"})
    assert [r["node"] for r in departed_rows(admin)] == [dead.tcp_address]
    assert call(admin, "POST", "/api/nodes/departed/clear", headers=ALICE) == (200, {"message": ""})
    assert departed_rows(admin) == []
    wait_until(lambda: [n["action"] for n in notifications.received] == ["clear_departed_nodes"], timeout=15)
