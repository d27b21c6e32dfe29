"""The V2 connection as data: its states, what each state allows, and the
upgrade that follows IDENTIFY.

Both ends drive the same description: nsqd checks every command against
``next_state`` and performs the ``upgrade_steps`` of the IDENTIFY answer it
sends; the client performs the same steps on the answer it receives (it
starts TLS where nsqd does, switches its codec where nsqd does, and reads
the ``OK`` that nsqd sends at each ``CONFIRM``).
"""

from enum import IntEnum
from typing import NamedTuple

from .errors import E_INVALID, ProtocolError


class State(IntEnum):
    """NSQ's numbers, which ``/stats`` shows as a client's ``state``."""

    INIT = 0
    SUBSCRIBED = 3
    CLOSING = 4  # CLS received: no more messages, in-flight ones may still be answered


#: Commands valid in every state (a producer never subscribes).
ANY_STATE = frozenset({b"NOP", b"PUB", b"MPUB", b"DPUB", b"KPUB", b"KMPUB", b"KDPUB"})

#: The other commands: in which state each is valid, and the state it leads to.
TRANSITIONS: dict[State, dict[bytes, State]] = {
    # RAUTH, REPL: a replicated nsqd's peer, which never subscribes (nsqd/replication)
    State.INIT: {b"IDENTIFY": State.INIT, b"AUTH": State.INIT, b"SUB": State.SUBSCRIBED, b"RAUTH": State.INIT,
                 b"REPL": State.INIT},
    State.SUBSCRIBED: {b"RDY": State.SUBSCRIBED, b"FIN": State.SUBSCRIBED, b"REQ": State.SUBSCRIBED,
                       b"TOUCH": State.SUBSCRIBED, b"CLS": State.CLOSING},
    State.CLOSING: {b"RDY": State.CLOSING, b"FIN": State.CLOSING, b"REQ": State.CLOSING,
                    b"TOUCH": State.CLOSING},
}

#: Valid, but without effect: a consumer that sent CLS asks for no more messages.
IGNORED = frozenset({(State.CLOSING, b"RDY")})

#: Every command valid in each state -> the state it leads to, or None when
#: it is ignored there: one lookup per command on a server's hot path.
ALLOWED: dict[State, dict[bytes, State | None]] = {
    state: {**{command: state for command in ANY_STATE},
            **{command: None if (state, command) in IGNORED else following
               for command, following in TRANSITIONS[state].items()}}
    for state in State
}


def invalid_in_state(command: bytes) -> ProtocolError:
    return ProtocolError(E_INVALID, f"cannot {command.decode('ascii', 'replace')} in current state")


def next_state(state: State, command: bytes) -> State:
    """The state after ``command`` succeeds in ``state``; ``E_INVALID`` as
    nsqd words it when the command is not valid there."""
    allowed = ALLOWED[state]
    if command not in allowed:
        raise invalid_in_state(command)
    following = allowed[command]
    return state if following is None else following


# --- the upgrade after IDENTIFY --------------------------------------------------------------


class StartTLS(NamedTuple):
    """Both ends start TLS on the connection (the client as the TLS client)."""


class EnableCodec(NamedTuple):
    """Both ends compress everything from here on."""

    snappy: bool
    deflate: bool
    deflate_level: int


class Confirm(NamedTuple):
    """nsqd sends ``OK`` through the layers enabled so far; the client reads it."""


START_TLS, CONFIRM = StartTLS(), Confirm()


def upgrade_steps(answer: dict) -> list:
    """What follows the (plain) IDENTIFY answer, in NSQ's order: TLS and its
    ``OK``, then compression and its ``OK``. ``answer`` is the negotiated
    JSON (an IDENTIFY without feature negotiation upgrades nothing)."""
    steps = []
    if answer.get("tls_v1"):
        steps += [START_TLS, CONFIRM]
    if answer.get("snappy") or answer.get("deflate"):
        steps += [EnableCodec(bool(answer.get("snappy")), bool(answer.get("deflate")),
                              int(answer.get("deflate_level") or 6)), CONFIRM]
    return steps
