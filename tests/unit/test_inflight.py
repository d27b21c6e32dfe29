"""A channel's in-flight messages: deadlines in order per timeout, TOUCH, the clamp, clients leaving."""

from nsqpy.nsqd.inflight import InFlight
from nsqpy.nsqd.message import Message


def message(n: int) -> Message:
    return Message(b"%016d" % n, b"body", 0)


def test_messages_expire_in_deadline_order_across_timeouts():
    flight = InFlight()
    a, b, c = message(1), message(2), message(3)
    flight.start([a], "slow", now=0.0, timeout=60)
    flight.start([b], "fast", now=1.0, timeout=5)
    flight.start([c], "fast", now=2.0, timeout=5)
    assert flight.expired(5.9) == [] and len(flight) == 3
    assert flight.expired(6.5) == [b]
    assert flight.expired(59) == [c]
    assert flight.expired(60) == [a] and len(flight) == 0


def test_a_finished_message_never_expires():
    flight = InFlight()
    a, b = message(1), message(2)
    flight.start([a], "c", 0.0, 5)
    flight.start([b], "c", 1.0, 5)
    assert flight.take(a.id, "c") is a and a.id not in flight
    assert flight.expired(100) == [b]


def test_touch_moves_the_deadline_and_keeps_the_order():
    flight = InFlight()
    a, b = message(1), message(2)
    flight.start([a], "c", 0.0, 5)
    flight.start([b], "c", 1.0, 5)
    flight.touch(a, now=3.0, max_msg_timeout=900)
    assert a.deadline == 8.0
    assert flight.expired(6.5) == [b]
    assert flight.expired(8.0) == [a]


def test_a_touch_clamped_by_max_msg_timeout_expires_on_time():
    """msg_timeout 1.5 s, max 2 s: A delivered at 0, B at 0.9, A touched at 1.0.
    A's deadline is 2.0 (the clamp), earlier than B's 2.4: at 2.1 A has expired."""
    flight = InFlight()
    a, b = message(1), message(2)
    flight.start([a], "c", 0.0, 1.5)
    flight.start([b], "c", 0.9, 1.5)
    flight.touch(a, now=1.0, max_msg_timeout=2.0)
    assert a.deadline == 2.0
    assert flight.expired(2.1) == [a]
    assert flight.expired(2.4) == [b]


def test_a_clamped_message_finished_before_its_deadline_is_skipped():
    flight = InFlight()
    a = message(1)
    flight.start([a], "c", 0.0, 1.5)
    flight.touch(a, 1.0, 2.0)
    flight.take(a.id, "c")
    assert flight.expired(5) == [] and len(flight) == 0


def test_a_client_leaving_takes_out_only_its_messages():
    flight = InFlight()
    mine, theirs = message(1), message(2)
    flight.start([mine], "me", 0.0, 5)
    flight.start([theirs], "them", 0.0, 5)
    assert flight.remove_client("me") == [mine]
    assert flight.get(theirs.id) is theirs and flight.get(mine.id) is None
    assert flight.clear() == [theirs] and len(flight) == 0
