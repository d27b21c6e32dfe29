"""The consumer's dedup window: copies dropped, held while one is handled, bounded by count and age."""

import pytest

from nsqpy.client import Consumer
from nsqpy.client.dedup import DELIVER, DROP, HOLD, DedupWindow

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_copy_of_a_handled_message_is_dropped():
    window = DedupWindow(clock=Clock())
    assert window.admit("1:0:0", "first") == DELIVER
    assert window.finished("1:0:0", "first") == []
    assert window.admit("1:0:0", "copy") == DROP
    assert window.copies_dropped == 1


def test_a_copy_arriving_during_handling_is_held_then_dropped_when_it_succeeds():
    window = DedupWindow(clock=Clock())
    assert window.admit("k", "first") == DELIVER
    assert window.admit("k", "copy1") == HOLD
    assert window.admit("k", "copy2") == HOLD
    assert window.finished("k", "first") == ["copy1", "copy2"]
    assert window.copies_dropped == 2


def test_a_held_copy_is_handled_when_the_first_is_requeued():
    window = DedupWindow(clock=Clock())
    window.admit("k", "first")
    window.admit("k", "copy")
    assert window.requeued("k", "first") == "copy"
    assert window.requeued("k", "stranger") is None  # only the one being handled counts
    assert window.admit("k", "redelivered first") == HOLD  # behind the copy now handled
    assert window.finished("k", "copy") == ["redelivered first"]


def test_a_requeued_message_without_copies_is_delivered_again_later():
    window = DedupWindow(clock=Clock())
    window.admit("k", "first")
    assert window.requeued("k", "first") is None
    assert window.admit("k", "first again") == DELIVER


def test_keys_are_forgotten_past_max_keys_oldest_first():
    window = DedupWindow(max_keys=3, clock=Clock())
    for key in "abcd":
        window.admit(key, key)
        window.finished(key, key)
    assert len(window) == 3
    assert window.admit("a", "late copy") == DELIVER  # forgotten
    assert window.admit("d", "copy") == DROP


def test_keys_are_forgotten_past_max_age():
    clock = Clock()
    window = DedupWindow(max_age=60, clock=clock)
    window.admit("old", "m")
    window.finished("old", "m")
    clock.now += 30
    window.admit("new", "m")
    window.finished("new", "m")
    clock.now += 31
    assert window.admit("old", "copy") == DELIVER
    assert window.admit("new", "copy") == DROP


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError):
        DedupWindow(max_keys=0)


def test_a_consumer_keeps_the_window_it_is_given_even_while_empty():
    window = DedupWindow(max_keys=10)
    assert len(window) == 0
    assert Consumer("t", "c", lambda message: None, dedup=window).dedup is window
    with pytest.raises(ValueError, match="no dedup"):
        Consumer("t", "c", lambda connection, arrivals: None, dedup=window, bulk=True)
