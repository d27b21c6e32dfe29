"""The client given the wrong port or the wrong argument, against real
daemons: one line that names what was given and what to give instead."""

import asyncio
import logging

import pytest

from nsqpy.client import (Config, ConfigError, ConnectionClosedError, Consumer, InvalidArgumentError, NSQError,
                          Producer, SyncProducer)
from tests.integration.test_client import Collector, eventually, run

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


def test_nsqds_http_port_dialled_as_its_tcp_port_says_so(nsqd, topic):
    with SyncProducer(nsqd.http_address) as producer:
        with pytest.raises(ConnectionClosedError) as refused:
            producer.publish(topic, b"x")
    text = str(refused.value)
    assert "\n" not in text and "E_BAD_BODY" not in text, text
    assert f"connection to nsqd at {nsqd.http_address} closed: it answers in HTTP" in text
    assert "looks like an HTTP port" in text and "--tcp-address, 4150 by default" in text


def test_nsqlookupds_tcp_port_dialled_as_nsqds_asks_whether_it_is_nsqds(start_lookupd, topic):
    """nsqlookupd hangs up on the V2 magic (or resets): the line says what
    that most likely means rather than only 'closed'."""
    lookupd = start_lookupd()
    with SyncProducer(lookupd.tcp_address) as producer:
        with pytest.raises(ConnectionClosedError) as refused:
            producer.publish(topic, b"x")
    text = str(refused.value)
    assert "\n" not in text, text
    assert "before answering IDENTIFY: is this nsqd's TCP port? (its --tcp-address, 4150 by default" in text


@pytest.mark.parametrize("wrong", ["lookupd TCP", "nsqd TCP", "nsqd HTTP"])
def test_a_lookupd_address_of_the_wrong_kind_is_one_line_naming_nsqlookupds_http_port(
        wrong, start_lookupd, nsqd, topic, caplog):
    lookupd = start_lookupd()
    address = {"lookupd TCP": lookupd.tcp_address, "nsqd TCP": nsqd.tcp_address,
               "nsqd HTTP": nsqd.http_address}[wrong]

    async def main():
        consumer = Consumer(topic, "ch", Collector(), config=Config(lookupd_poll_interval=0.2))
        await consumer.connect_to_nsqlookupd(address)
        await eventually(lambda: len(failures()) >= 2, timeout=10)  # polled again: the same line
        await consumer.stop()

    def failures():
        return [r.getMessage() for r in caplog.records if f"lookupd {address} failed" in r.getMessage()]

    with caplog.at_level(logging.WARNING, logger="nsqpy.client"):
        run(main())
    lines = failures()
    assert all("\n" not in line for line in lines), lines
    expected = ("it has no /lookup, so it is not nsqlookupd" if wrong == "nsqd HTTP"
                else "it answers in NSQ's TCP protocol, not HTTP: this looks like a TCP port")
    assert expected in lines[0] and "give nsqlookupd's HTTP port (its --http-address, 4161 by default)" in lines[0]


def test_a_topic_lookupd_does_not_know_yet_is_no_failure(start_lookupd, topic, caplog):
    lookupd = start_lookupd()

    async def main():
        consumer = Consumer(topic, "ch", Collector(), config=Config(lookupd_poll_interval=0.2))
        await consumer.connect_to_nsqlookupd(lookupd.http_address)
        await asyncio.sleep(1)
        await consumer.stop()

    with caplog.at_level(logging.WARNING, logger="nsqpy.client"):
        run(main())
    assert not [r for r in caplog.records if "failed" in r.getMessage()]


@pytest.mark.parametrize("refused", [
    lambda: Consumer("bad*topic", "ch", lambda m: None),
    lambda: Consumer("topic", "bad channel", lambda m: None),
    lambda: Consumer("topic", "ch", lambda m: None, concurrency=0),
    lambda: Producer("127.0.0.1"),
    lambda: Producer("127.0.0.1:4150", replicas=0),
    lambda: Config(max_in_flight=-1),
], ids=["topic", "channel", "concurrency", "address", "replicas", "config"])
def test_an_argument_refused_before_sending_is_an_nsq_error_and_a_value_error(refused):
    """docs/client.md: every error the client raises is an NSQError; code
    that caught the plain ValueError it used to be still catches it."""
    with pytest.raises(InvalidArgumentError) as error:
        refused()
    assert isinstance(error.value, NSQError) and isinstance(error.value, ValueError)
    assert issubclass(ConfigError, InvalidArgumentError)


def test_a_bad_topic_name_at_publish_is_an_nsq_error(nsqd):
    async def main():
        async with Producer(nsqd.tcp_address) as producer:
            with pytest.raises(NSQError, match="invalid topic name 'bad topic'"):
                await producer.publish("bad topic", b"x")

    run(main())
