"""A retained topic's first channel takes the backlog its log kept; the
marker of that backlog goes once nsqd.dat lists the channel. nsqd killed
between the two (nsqd.dat written, the marker still on disk) must not
rewind the channel at the next start: in durable mode what it had
finished stays finished; in memory mode nothing is lost (what was
finished within the last second may come again, as documented)."""

import sys

import pytest

from nsqpy.localcluster import nsqd_process
from nsqpy.topiclog.log import BACKLOG_FILE
from tests.support.wire import WireConn, http, wait_until

COUNT = 100
FINISHED = 60

#: nsqd whose backlog marker is never removed from disk: every start is as
#: after a kill -9 inside that window
MARKER_STAYS = '''
import sys
from nsqpy.topiclog.log import TopicLog

def take_backlog_but_leave_the_file(self):
    offset, self.backlog_from = self.backlog_from, None
    return offset

TopicLog.take_backlog = take_backlog_but_leave_the_file
from nsqpy.cli.nsqd import main
sys.exit(main())
'''


@pytest.mark.parametrize("mode", [("--mem-queue-size=0", "--sync-every=1"), ("--mem-queue-size=10000",)],
                         ids=["durable", "memory"])
def test_a_crash_before_the_backlog_marker_goes_rewinds_nothing(tmp_path, topic, mode):
    data = tmp_path / "data"
    data.mkdir()
    wrapper = tmp_path / "nsqd-marker-stays"
    wrapper.write_text(f"#!{sys.executable}\n{MARKER_STAYS}")
    wrapper.chmod(0o755)
    flags = ("--retention=24h", *mode)
    with nsqd_process(str(data), *flags, executable=str(wrapper)) as first:
        assert http("POST", f"{first.http_url}/topic/create?topic={topic}")[0] == 200
        with WireConn(first.tcp_hostport) as conn:
            for index in range(COUNT):
                conn.publish(topic, b"m%03d" % index)
        finished = set()
        with WireConn(first.tcp_hostport) as conn:
            conn.subscribe(topic, "c", rdy=FINISHED)  # the first channel: it takes the backlog
            for message in conn.messages(FINISHED):
                conn.send(b"FIN " + message.id + b"\n")
                finished.add(message.body)
            conn.answers_handled()
        wait_until(lambda: b'"c"' in (data / "nsqd.dat").read_bytes(), timeout=30)
        assert any(path.name == BACKLOG_FILE for path in data.rglob(BACKLOG_FILE))
        first.kill()
    with nsqd_process(str(data), *flags) as second:
        with WireConn(second.tcp_hostport) as conn:
            conn.subscribe(topic, "c", rdy=COUNT)
            delivered = conn.drain(quiet=2)
    unfinished = {b"m%03d" % i for i in range(COUNT)} - finished
    if "--sync-every=1" in mode:
        assert not finished & set(delivered), f"{len(finished & set(delivered))} finished messages came back"
        assert sorted(delivered) == sorted(unfinished)
    else:
        assert unfinished <= set(delivered) and len(delivered) == len(set(delivered))
    assert not any(data.rglob(BACKLOG_FILE))
