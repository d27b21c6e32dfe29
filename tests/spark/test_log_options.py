"""The log reader's options as a user finds them: an option that would do
nothing (a start asked of a topic read through a channel, an end asked of
a stream, offsets of an nsqd that is not read, a timestamp in seconds)
fails in one line naming it, where it used to read something else than was
meant; a batch cap given for the channel readers caps the log reader's
batches too."""

import json
import time

import pytest

from tests.support.wire import http

from .conftest import publish
from .test_log_reader import log_options, retain, run_available_now

pytestmark = pytest.mark.spark


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def load_error(spark, options: dict) -> str:
    """The one line ``readStream...load()`` fails with."""
    with pytest.raises(Exception) as failure:
        spark.readStream.format("nsq").options(**options).load()
    return str(failure.value)


def batch_sizes(query) -> list[int]:
    """The rows of each batch a query that ended without error read."""
    assert query.exception() is None
    return [progress["numInputRows"] for progress in query.recentProgress if progress["numInputRows"]]


def batch_rows(spark, options: dict) -> list[bytes]:
    rows = spark.read.format("nsq").options(**options).load().orderBy("offset").collect()
    return [bytes(row.body) for row in rows]


@pytest.mark.parametrize("given", [{"startingOffsets": "earliest"}, {"startingTimestamp": "now"},
                                   {"startingOffsets": "earliest", "channel": "archive"},
                                   {"endingOffsets": "latest", "channel": "archive"}],
                         ids=["startingOffsets", "startingTimestamp", "with-a-channel", "endingOffsets"])
def test_a_start_asked_of_a_plain_topic_names_retention(spark, spark_nsqd, topic, given):
    """Before: "option channel: missing" without a channel, and with one the
    option was ignored (the channel read from what it held)."""
    assert http("POST", f"{spark_nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    given = {key: str(now_ms()) if value == "now" else value for key, value in given.items()}
    (name,) = [key for key in given if key != "channel"]
    message = load_error(spark, log_options(spark_nsqd, topic, **given))
    assert f"option {name} needs a retained topic, read by offset (docs/retention.md)" in message
    assert f"topic {topic} is not retained on nsqd {spark_nsqd.tcp_address}" in message
    assert "option channel: missing" not in message
    assert message.count("give a channel") == ("channel" not in given)


def test_a_start_asked_of_a_channel_reader_on_a_retained_topic_is_refused(spark, spark_nsqd, topic):
    retain(spark_nsqd, topic)
    message = load_error(spark, log_options(spark_nsqd, topic, channel="archive", reader="driver",
                                            startingOffsets="earliest"))
    assert "option startingOffsets needs a retained topic" in message
    assert "reader=driver reads the topic through a channel" in message


@pytest.mark.parametrize("given", [{"endingOffsets": "latest"}, {"endingTimestamp": "now"}])
def test_an_end_asked_of_a_stream_fails_it_as_it_starts(spark, spark_nsqd, topic, tmp_path, given):
    """Before: ignored, the stream read on past it."""
    retain(spark_nsqd, topic)
    publish(spark_nsqd, topic, [b"m-%d" % i for i in range(10)])
    given = {key: str(now_ms()) if value == "now" else value for key, value in given.items()}
    query = run_available_now(spark, log_options(spark_nsqd, topic, startingOffsets="earliest", **given),
                              tmp_path / "out", tmp_path / "ck")
    assert f"option {next(iter(given))}: a stream has no end" in str(query.exception())


def test_offsets_of_an_nsqd_that_is_not_read_fail_the_read(spark, spark_nsqd, topic, tmp_path):
    """Before: the node named was not there, so every node read started at
    latest (and ended at latest): 0 rows, no error."""
    retain(spark_nsqd, topic)
    publish(spark_nsqd, topic, [b"m-%d" % i for i in range(100)])
    elsewhere = json.dumps({"10.9.9.9:4150": 5})
    expected = (f"names nsqd 10.9.9.9:4150, which keeps no log of topic {topic} read here (the nsqd read, by TCP "
                f"address: {spark_nsqd.tcp_address})")
    with pytest.raises(Exception) as failure:
        batch_rows(spark, log_options(spark_nsqd, topic, startingOffsets=elsewhere))
    assert f"option startingOffsets {expected}" in str(failure.value)
    with pytest.raises(Exception) as failure:
        batch_rows(spark, log_options(spark_nsqd, topic, endingOffsets=elsewhere))
    assert f"option endingOffsets {expected}" in str(failure.value)
    query = run_available_now(spark, log_options(spark_nsqd, topic, startingOffsets=elsewhere),
                              tmp_path / "out", tmp_path / "ck")
    assert f"option startingOffsets {expected}" in str(query.exception())


@pytest.mark.parametrize("name", ["startingTimestamp", "endingTimestamp"])
def test_a_timestamp_in_seconds_is_refused_with_the_milliseconds_meant(spark, spark_nsqd, topic, name):
    """Before: read as a moment of January 1970, so everything."""
    retain(spark_nsqd, topic)
    seconds = int(time.time())
    message = load_error(spark, log_options(spark_nsqd, topic, **{name: seconds}))
    assert (f"option {name} takes Unix milliseconds, and {seconds} is before 1973: in seconds? the same time "
            f"is {seconds * 1000}") in message


def test_a_future_timestamp_is_the_logs_end_and_a_bad_one_names_its_option(spark, spark_nsqd, topic, tmp_path):
    """A driver whose clock runs ahead of nsqd's asks for a time no record
    has reached: nsqd answers its log's end. A time nsqd cannot take at all
    (past its 2^80 ns) fails in a line naming the option."""
    retain(spark_nsqd, topic)
    bodies = [b"m-%d" % i for i in range(100)]
    publish(spark_nsqd, topic, bodies)
    hour_ahead = now_ms() + 3_600_000
    assert batch_rows(spark, log_options(spark_nsqd, topic, endingTimestamp=hour_ahead)) == bodies
    assert batch_rows(spark, log_options(spark_nsqd, topic, startingTimestamp=hour_ahead)) == []
    stream = log_options(spark_nsqd, topic, startingTimestamp=hour_ahead)
    assert batch_sizes(run_available_now(spark, stream, tmp_path / "out", tmp_path / "ck")) == []
    publish(spark_nsqd, topic, [b"later"])
    assert batch_sizes(run_available_now(spark, stream, tmp_path / "out", tmp_path / "ck")) == [1]
    with pytest.raises(Exception) as failure:
        batch_rows(spark, log_options(spark_nsqd, topic, startingTimestamp=10 ** 19))
    assert (f"option startingTimestamp=10000000000000000000: nsqd {spark_nsqd.tcp_address} refused it: "
            f"INVALID_TIME") in str(failure.value)


def test_max_messages_per_batch_caps_the_log_readers_batches(spark, spark_nsqd, topic, tmp_path):
    """Before: the channel readers' cap, ignored by the log reader (a
    600,000-message backlog was one batch); maxOffsetsPerTrigger wins."""
    retain(spark_nsqd, topic)
    publish(spark_nsqd, topic, [b"m-%d" % i for i in range(2500)])
    options = log_options(spark_nsqd, topic, startingOffsets="earliest", max_messages_per_batch=1000)
    assert batch_sizes(run_available_now(spark, options, tmp_path / "out", tmp_path / "ck")) == [1000, 1000, 500]
    options["maxOffsetsPerTrigger"] = "2000"
    assert batch_sizes(run_available_now(spark, options, tmp_path / "out2", tmp_path / "ck2")) == [2000, 500]
