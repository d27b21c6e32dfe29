"""The V2 connection's states and upgrade steps, as data both ends drive."""

import pytest

from nsqpy.protocol.errors import ProtocolError
from nsqpy.protocol.v2 import CONFIRM, IGNORED, START_TLS, EnableCodec, State, next_state, upgrade_steps


@pytest.mark.parametrize("state, command, after", [
    (State.INIT, b"IDENTIFY", State.INIT),
    (State.INIT, b"AUTH", State.INIT),
    (State.INIT, b"SUB", State.SUBSCRIBED),
    (State.INIT, b"PUB", State.INIT),
    (State.SUBSCRIBED, b"RDY", State.SUBSCRIBED),
    (State.SUBSCRIBED, b"FIN", State.SUBSCRIBED),
    (State.SUBSCRIBED, b"CLS", State.CLOSING),
    (State.SUBSCRIBED, b"MPUB", State.SUBSCRIBED),
    (State.CLOSING, b"TOUCH", State.CLOSING),
    (State.CLOSING, b"NOP", State.CLOSING),
])
def test_valid_commands_and_where_they_lead(state, command, after):
    assert next_state(state, command) is after


@pytest.mark.parametrize("state, command", [
    (State.INIT, b"RDY"), (State.INIT, b"FIN"), (State.INIT, b"CLS"),
    (State.SUBSCRIBED, b"SUB"), (State.SUBSCRIBED, b"IDENTIFY"), (State.SUBSCRIBED, b"AUTH"),
    (State.CLOSING, b"CLS"), (State.CLOSING, b"SUB"),
])
def test_invalid_commands_get_nsqs_e_invalid(state, command):
    with pytest.raises(ProtocolError) as error:
        next_state(state, command)
    assert error.value.code == "E_INVALID"
    assert error.value.description == f"cannot {command.decode()} in current state"


def test_rdy_after_cls_is_valid_but_ignored():
    assert next_state(State.CLOSING, b"RDY") is State.CLOSING and (State.CLOSING, b"RDY") in IGNORED


def test_state_numbers_are_nsqs():
    assert (State.INIT, State.SUBSCRIBED, State.CLOSING) == (0, 3, 4)


@pytest.mark.parametrize("answer, steps", [
    ({}, []),
    ({"tls_v1": False, "snappy": False, "deflate": False}, []),
    ({"tls_v1": True}, [START_TLS, CONFIRM]),
    ({"snappy": True}, [EnableCodec(True, False, 6), CONFIRM]),
    ({"deflate": True, "deflate_level": 3}, [EnableCodec(False, True, 3), CONFIRM]),
    ({"tls_v1": True, "deflate": True, "deflate_level": 9},
     [START_TLS, CONFIRM, EnableCodec(False, True, 9), CONFIRM]),
])
def test_upgrade_steps_follow_the_identify_answer_in_nsqs_order(answer, steps):
    assert upgrade_steps(answer) == steps
