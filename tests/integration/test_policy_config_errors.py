"""Bad TTL and depth limit settings get 400 with an NSQ-style code and
change nothing."""

import pytest

from tests.integration.nsqd_policies import create
from tests.support.wire import http_json


@pytest.mark.parametrize("path,query,message", [
    ("topic", "ttl_ms=-1", "INVALID_TTL"),
    ("topic", "ttl_ms=soon", "INVALID_TTL"),
    ("topic", "expire_action=archive", "INVALID_EXPIRE_ACTION"),
    ("channel", "channel=ch&ttl_ms=1.5", "INVALID_TTL"),
    ("topic", "max_depth=-1", "INVALID_MAX_DEPTH"),
    ("topic", "full_policy=block", "INVALID_FULL_POLICY"),
    ("channel", "channel=ch&max_depth=lots", "INVALID_MAX_DEPTH"),
    ("topic", "ttl_ms=5&max_depth=-1", "INVALID_MAX_DEPTH"),  # nothing of a refused request is applied
])
def test_bad_values_are_refused(shared_nsqd, topic, path, query, message):
    url = shared_nsqd.http_url
    create(shared_nsqd, topic, "ch")
    assert http_json("POST", f"{url}/{path}/config?topic={topic}&{query}") == (400, {"message": message})
    assert http_json("GET", f"{url}/topic/config?topic={topic}") == (
        200, {"ttl_ms": 0, "expire_action": "drop", "retention_ms": 0, "retention_bytes": 0,
              "publish_key_window_ms": 120_000, "max_depth": 0, "full_policy": "reject"})
    _, channel = http_json("GET", f"{url}/channel/config?topic={topic}&channel=ch")
    assert (channel["ttl_ms"], channel["max_depth"]) == (0, 0)
