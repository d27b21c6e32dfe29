"""A node's identity (its data dir, its --node-id) cannot be borrowed: a
copy of a live node's data dir (a cloned VM, a volume snapshot) and a
second nsqd with a live node's id are refused in one line, whatever the
timing, and the live node goes on as if nothing had happened."""

import asyncio
import shutil
import subprocess
import sys
import time

import pytest

from nsqpy.localcluster import free_port
from nsqpy.nsqd.replication.etcd import Etcd
from nsqpy.nsqd.replication.membership import Membership, NodeIdTaken
from tests.replication.conftest import held_for, mpub
from tests.support.wire import WireConn, http, wait_until

pytestmark = pytest.mark.replication


def nsqd_command(cluster, data_path, node_id: int, tcp_port: int = 0) -> list[str]:
    return [sys.executable, "-m", "nsqpy.cli.nsqd", f"--tcp-address=127.0.0.1:{tcp_port or free_port()}",
            f"--http-address=127.0.0.1:{free_port()}", f"--data-path={data_path}", "--broadcast-address=127.0.0.1",
            f"--node-id={node_id}", "--replication-factor=2", "--replication-lease=3s",
            f"--etcd-endpoint={cluster.etcd.client_url}", f"--replication-secret-file={cluster.secret_file}",
            *cluster.nsqd_args]


def last_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stderr
    return result.stderr.strip().splitlines()[-1]


def copy_data_dir(running, copy) -> None:
    """A copy of a running nsqd's data dir, file by file. The temporary
    files of its atomic writes (atomicfile.py) come and go while it is
    copied, and nothing reads them: they are left out."""
    shutil.copytree(running, copy, ignore=shutil.ignore_patterns("*.tmp"))


@pytest.mark.parametrize("node_id", [9, 1], ids=["its-own-node-id", "the-live-nodes-node-id"])
def test_a_copy_of_a_live_nodes_data_dir_is_refused_and_changes_nothing(replicated, topic, tmp_path, node_id):
    cluster = replicated(nsqd_args=("--mem-queue-size=0",))  # the copy holds the messages on disk
    cluster.wait_connected()
    live = cluster.nsqds[0]
    epoch = cluster.stats(0)["replication"]["epoch"]
    with WireConn(live.tcp_hostport) as consumer:
        consumer.subscribe(topic, "ch", rdy=0)
        sent = mpub(live, topic, range(2000))
        copy = tmp_path / "copy"
        copy_data_dir(cluster.tmp_path / "nsqd0", copy)
        started = time.monotonic()
        line = last_line(subprocess.run(nsqd_command(cluster, copy, node_id), capture_output=True, text=True,
                                        timeout=60))
        assert line.endswith(f"the data dir {copy} is a live nsqd's: epoch {epoch} of {live.tcp_address}, which it "
                             "names, is still renewed; a copy of a running nsqd's data dir (a cloned VM, a volume "
                             "snapshot) cannot join: give it an empty --data-path"), line
        print(f"copy refused in {time.monotonic() - started:.1f} s")
        time.sleep(5)  # longer than a lease: had the copy ended it, a survivor would have taken it over by now
        for index in range(3):
            replication = cluster.stats(index)["replication"]
            assert replication["takeovers"] == 0
        assert cluster.stats(0)["replication"]["epoch"] == epoch
        assert held_for(cluster, 1, live, epoch) == [2000]
        assert http("POST", f"{live.http_url}/pub?topic={topic}", b"m2000")[0] == 200
        # and the live node delivers every one of them itself
        consumer.send(b"RDY 2500\n")
        bodies = {m.body.decode() for m in consumer.messages(2001, timeout=30)}
    assert bodies == sent | {"m2000"}


def test_an_older_snapshot_of_a_node_that_restarted_since_is_refused(replicated, topic, tmp_path):
    """The snapshot names an epoch the node itself kept at a clean stop;
    the node runs again under a later one: the copy may not settle it."""
    cluster = replicated()
    cluster.wait_connected()
    live = cluster.nsqds[0]
    mpub(live, topic, range(100))
    copy = tmp_path / "snapshot"
    copy_data_dir(cluster.tmp_path / "nsqd0", copy)
    live.stop()
    live = cluster.start(0)
    cluster.wait_connected()
    epoch = cluster.stats(0)["replication"]["epoch"]
    line = last_line(subprocess.run(nsqd_command(cluster, copy, 9), capture_output=True, text=True, timeout=60))
    assert line.endswith(f"the data dir {copy} is a live nsqd's: {live.tcp_address}, which it names, is a member "
                         f"under epoch {epoch}; a copy of a running nsqd's data dir (a cloned VM, a volume "
                         "snapshot) cannot join: give it an empty --data-path"), line
    assert cluster.stats(0)["replication"]["epoch"] == epoch
    assert all(cluster.stats(index)["replication"]["takeovers"] == 0 for index in range(3))


def test_nsqd_started_together_with_one_node_id_are_not_both_accepted(replicated, tmp_path):
    """Three at the same moment: one joins, two are refused, whatever the timing."""
    cluster = replicated(count=1)
    ports = {tmp_path / f"same{index}": free_port() for index in range(3)}
    started = {}
    for path, port in ports.items():
        path.mkdir()
        started[subprocess.Popen(nsqd_command(cluster, path, 7, port), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)] = port
    try:
        def two_exited():
            exited = [process for process in started if process.poll() is not None]
            return exited if len(exited) >= 2 else None
        refused = wait_until(two_exited, timeout=60)
        time.sleep(2)
        accepted = [process for process in started if process.poll() is None]
        assert len(accepted) == 1, [process.communicate()[1][-2000:] for process in refused]
        for process in refused:
            _, errors = process.communicate(timeout=10)
            assert errors.strip().splitlines()[-1].endswith(
                f"--node-id 7 is also the node id of replicated nsqd 127.0.0.1:{started[accepted[0]]}: message ids "
                "would collide; give each nsqd its own --node-id"), errors
    finally:
        for process in started:
            process.kill()
            process.communicate(timeout=10)


def test_one_node_id_is_claimed_once_however_two_joins_interleave(replicated):
    """The node id and the address are claimed in one etcd transaction:
    two joins whose every step alternates cannot both pass a check."""
    cluster = replicated(count=0)

    async def join_both():
        etcds = [Etcd([cluster.etcd.client_url]) for _ in range(2)]
        memberships = [Membership(etcd, "/nsqpy", f"127.0.0.1:{port}", 3) for etcd, port in zip(etcds, (1001, 1002))]

        async def renew_while_joined():  # as a live node does, so a refused one cannot wait the winner out
            while True:
                await asyncio.sleep(1)
                for membership in memberships:
                    if membership.epoch:
                        await membership.renew()

        renewing = asyncio.create_task(renew_while_joined())
        try:
            joins = [membership.join({"node_id": 5}) for membership in memberships]
            return await asyncio.gather(*joins, return_exceptions=True)
        finally:
            renewing.cancel()
            for etcd in etcds:
                await etcd.close()

    results = asyncio.run(join_both())
    assert sorted(type(result).__name__ for result in results) == ["NodeIdTaken", "int"], results
    assert str(next(r for r in results if isinstance(r, NodeIdTaken))) in ("127.0.0.1:1001", "127.0.0.1:1002")
