"""What the HTTP API says it created, paused or deleted is in nsqd.dat by
the time it answers: a kill -9 right after the answer loses none of it, and
a burst of concurrent creates is all there too."""

import concurrent.futures
import json
import signal

from tests.support.wire import http, http_json


def _saved(data_path) -> dict:
    """nsqd.dat as written, read at once (no waiting for a later write)."""
    saved = json.loads((data_path / "nsqd.dat").read_bytes())
    return {t["name"]: (t["paused"], {c["name"]: c["paused"] for c in t["channels"] or []})
            for t in saved["topics"] or []}


def _post(url: str) -> None:
    status, _, body = http("POST", url, timeout=30)
    assert status == 200, body


def _kill(daemon) -> None:
    daemon.process.send_signal(signal.SIGKILL)
    daemon.process.wait(10)


def test_each_answer_comes_after_the_change_is_on_disk(start_nsqd, tmp_path, topic):
    data_path = tmp_path / "data"
    data_path.mkdir()
    nsqd = start_nsqd(data_path=data_path)
    url = nsqd.http_url
    _post(f"{url}/topic/create?topic={topic}")
    assert _saved(data_path) == {topic: (False, {})}
    _post(f"{url}/channel/create?topic={topic}&channel=kept")
    _post(f"{url}/channel/create?topic={topic}&channel=dropped")
    _post(f"{url}/channel/create?topic={topic}&channel=gone%23ephemeral")
    assert _saved(data_path) == {topic: (False, {"kept": False, "dropped": False})}
    _post(f"{url}/channel/pause?topic={topic}&channel=kept")
    _post(f"{url}/channel/delete?topic={topic}&channel=dropped")
    _post(f"{url}/topic/pause?topic={topic}")
    assert _saved(data_path) == {topic: (True, {"kept": True})}

    _kill(nsqd)
    restarted = start_nsqd(data_path=data_path)
    stats = http_json("GET", f"{restarted.http_url}/stats?format=json")[1]
    assert [(t["topic_name"], t["paused"], [(c["channel_name"], c["paused"]) for c in t["channels"]])
            for t in stats["topics"]] == [(topic, True, [("kept", True)])]


def test_a_burst_of_concurrent_creates_is_all_on_disk_when_answered(start_nsqd, tmp_path):
    data_path = tmp_path / "data"
    data_path.mkdir()
    url = start_nsqd(data_path=data_path).http_url
    names = [f"burst_{index}" for index in range(200)]

    def create(name: str) -> None:
        _post(f"{url}/topic/create?topic={name}")
        _post(f"{url}/channel/create?topic={name}&channel=c")

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(create, names))
    assert _saved(data_path) == {name: (False, {"c": False}) for name in names}
