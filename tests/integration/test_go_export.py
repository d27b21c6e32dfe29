"""``nsqd --export-for-go``: a durable data dir holding deferred messages is
loaded by NSQ's own nsqd with every acknowledged message delivered, after a
clean stop of ours or a kill -9. NSQ's nsqd comes from ../shared/reference
when it is there; the export itself is checked with ours either way."""

import os
import signal
from pathlib import Path

import pytest

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands as cmd
from tests.support.gonsqd import GO_NSQD, export_for_go
from tests.support.wire import WireConn, http

SAFE = ("--mem-queue-size=0", "--sync-every=1")



def delivered(data: Path, executable: str | None = None) -> list[bytes]:
    with nsqd_process(str(data), executable=executable) as daemon:
        with WireConn(daemon.tcp_hostport) as c:
            c.subscribe("kept", "ch", rdy=200)
            return c.drain(quiet=2)


def fill(data: Path, stop: str) -> list[bytes]:
    """60 PUBs and 40 DPUBs (an hour away) acknowledged into channel ch, then
    nsqd stopped by ``stop``."""
    bodies = []
    with nsqd_process(str(data), *SAFE) as daemon:
        assert http("POST", f"{daemon.http_url}/topic/create?topic=kept")[0] == 200
        assert http("POST", f"{daemon.http_url}/channel/create?topic=kept&channel=ch")[0] == 200
        with WireConn(daemon.tcp_hostport) as c:
            for i in range(100):
                body = b"m%03d" % i
                c.send(cmd.dpub("kept", 3_600_000, body) if i % 5 < 2 else cmd.pub("kept", body))
                c.expect_ok()
                bodies.append(body)
        daemon.process.send_signal(signal.SIGTERM if stop == "SIGTERM" else signal.SIGKILL)
        daemon.process.wait(30)
    return bodies


@pytest.mark.parametrize("stop", ["SIGTERM", "kill -9"])
def test_an_exported_data_dir_delivers_everything_at_once(tmp_path, stop):
    data = tmp_path / "data"
    bodies = fill(data, stop)
    result = export_for_go(data)
    assert result.returncode == 0, result.stderr
    assert "EXPORT: 40 deferred messages of 1 channels moved" in result.stderr
    assert not [name for name in os.listdir(data) if "#deferred" in name]
    assert export_for_go(data).returncode == 0  # nothing left to move: a second run changes nothing

    assert sorted(delivered(data)) == bodies  # ours, at once: the delay is forgotten, as NSQ forgets it


@pytest.mark.parametrize("stop", ["SIGTERM", "kill -9"])
def test_nsqs_own_nsqd_delivers_everything_from_an_exported_data_dir(tmp_path, stop):
    if not GO_NSQD.exists():
        pytest.skip(f"NSQ's nsqd is not at {GO_NSQD} (../shared/reference)")
    data = tmp_path / "data"
    bodies = fill(data, stop)
    assert export_for_go(data).returncode == 0
    assert sorted(delivered(data, executable=str(GO_NSQD))) == bodies


def test_export_refuses_a_data_dir_in_use(tmp_path):
    with nsqd_process(str(tmp_path)):
        result = export_for_go(tmp_path)
    assert result.returncode == 1
    assert "is in use by another nsqd" in result.stderr
    assert "Traceback" not in result.stderr
