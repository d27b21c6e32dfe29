"""The manual's examples of points in a log name one time, however written."""

import datetime
import re
from pathlib import Path

RETENTION_PAGE = Path(__file__).resolve().parents[2] / "docs" / "retention.md"


def test_the_from_tables_time_and_its_milliseconds_are_the_same_moment():
    text = RETENTION_PAGE.read_text()
    (rfc3339,) = re.findall(r"\| `(\d{4}-\d\d-\d\dT[\d:]+Z)` \| the first accepted at or after", text)
    (millis,) = re.findall(r"\| `(\d+)ms` \| the same, as Unix milliseconds \|", text)
    moment = datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    assert int(millis) == int(moment.timestamp() * 1000)
