"""What a turn of the event loop left for the disk, written before its answers.

A disk queue's acknowledgements and marks, a retained topic's records, a
topic's publish keys and the PUBs a topic took in the turn
(``Topic.publish_in_turn``) are written once per loop turn, however many
commands the turn had (``mark`` schedules it), and always before an answer
leaves (``flush``: writes.py calls it before a turn's run of writes,
``ClientV2.flush`` before any other). A write the disk refuses takes back
the OKs that were queued for publishes waiting on it
(``answered_before_write``): the publisher gets the error it would have
had, had the write come first.

Compiled with the message path (setup.py): every command that answers
checks here first, so the check must cost next to nothing.
"""

from typing import TYPE_CHECKING, Any

from ..protocol.errors import ProtocolError

if TYPE_CHECKING:  # client.py writes through this module
    from .client import ClientV2


class DirtyWriters:
    __slots__ = ("nsqd", "writers", "answered_early")

    def __init__(self, nsqd: Any):
        self.nsqd = nsqd  # its loop, log and health
        self.writers: list[Any] = []  # disk queues, topic logs, publish keys, topics with something to write
        # writer -> [(client, place in its answers, code, command)]
        self.answered_early: dict[Any, list[tuple["ClientV2", tuple[int, int], str, str]]] = {}

    def mark(self, writer: Any) -> None:
        """``writer`` has acknowledgements, marks, records, keys or PUBs not yet
        written, and they are, once the work of this loop turn is done."""
        self.writers.append(writer)
        if len(self.writers) == 1:
            self.nsqd.loop.call_soon(self.flush)

    def before_answers(self, writer: Any) -> None:
        """``writer`` has what an answer queued in this turn waits for: the
        write of that answer writes it first (writes.py, ``ClientV2.flush``),
        so, unlike ``mark``, this schedules nothing of its own."""
        self.writers.append(writer)

    def flush(self) -> None:
        """Every acknowledgement and mark so far written to the disk queues'
        journals (no fsync: a sync every --sync-every or --sync-timeout does
        that), so a crash of this process loses none: a FIN stays done
        through kill -9 whatever the sync settings; and the turn's PUBs
        queued. One write per writer touched in a loop turn, however many
        FINs or PUBs it had."""
        if not self.writers:
            return
        writers, self.writers = self.writers, []
        answered = self.answered_early
        if answered:
            self.answered_early = {}
        for writer in writers:
            try:
                writer.flush()
            except OSError as error:
                nsqd = self.nsqd
                nsqd.health_error = str(error)
                nsqd.log.error("DISKQUEUE(%s): flush failed: %s", writer.name, error)
                for client, place, code, command in answered.get(writer, ()):
                    client.replace_answer(place, ProtocolError(code, f"{command} failed {error}"))

    def answered_before_write(self, waiting: tuple, client: "ClientV2", code: str, command: str) -> None:
        """``client``'s OK is queued for a publish whose records (or keys)
        wait for the writes of ``waiting`` at the end of this turn (before
        any answer is sent): if one fails, the publisher gets ``code``
        instead."""
        answer = (client, client.answer_place(), code, command)
        answered = self.answered_early
        for writer in waiting:
            answers = answered.get(writer)
            if answers is None:
                answered[writer] = [answer]
            else:
                answers.append(answer)
