"""nsqpy.metrics' hand-written exposition reads back through
prometheus_client's parser exactly as written."""

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nsqpy.metrics import TextFamily, daemon_registry, label_text


def parse(text: str) -> list:
    return list(text_string_to_metric_families(text))


def test_families_round_trip_through_the_parser():
    gauge = TextFamily("nsqd_channel_depth", "gauge", "Messages queued.")
    counter = TextFamily("nsqd_channel_messages_total", "counter", "Messages put.")
    for channel, depth in [("a", 3), ("b#ephemeral", 0)]:
        labels = label_text(topic="t", channel=channel)
        gauge.add(labels, depth)
        counter.add(labels, depth * 10)
    families = {family.name: family for family in parse(gauge.text() + counter.text())}
    assert families["nsqd_channel_depth"].type == "gauge"
    assert families["nsqd_channel_depth"].documentation == "Messages queued."
    assert [(s.labels, s.value) for s in families["nsqd_channel_depth"].samples] == [
        ({"topic": "t", "channel": "a"}, 3), ({"topic": "t", "channel": "b#ephemeral"}, 0)]
    assert families["nsqd_channel_messages"].type == "counter"
    assert [s.value for s in families["nsqd_channel_messages"].samples] == [30, 0]


@pytest.mark.parametrize("value", ['quote"d', "back\\slash", "new\nline", "plain.name-1_x"])
def test_label_values_are_escaped(value):
    family = TextFamily("x", "gauge", "help with \\ and\nnewline")
    family.add(label_text(name=value), 1.5)
    [parsed] = parse(family.text())
    assert parsed.documentation == "help with \\ and\nnewline"
    assert parsed.samples[0].labels == {"name": value}
    assert parsed.samples[0].value == 1.5


def test_a_daemon_registry_holds_process_and_build_figures():
    names = {family.name for family in parse(generate_latest(daemon_registry("nsqd")).decode())}
    assert {"nsqd_build_info", "process_cpu_seconds", "process_resident_memory_bytes", "python_info"} <= names
