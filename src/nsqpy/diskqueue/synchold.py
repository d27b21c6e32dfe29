"""Fsyncs held back for a moment by the writers' owner.

A disk queue or a topic log with ``sync_every`` 1 fsyncs each write as it
makes it. nsqd's keyed publishes (nsqd/publish_keys.py) need one thing
between a message's write and its fsync: the key's own write. A kill -9
during the fsync keeps the message (the kernel has it) and, were the key
written after the fsync, loses the key, and the publisher's retry of the
unanswered publish would be queued again. So, while a ``SyncHold`` holds,
a writer whose fsync is due hands itself over (``take``) instead of
syncing; the owner writes the keys and then ``release`` syncs every writer
it took, before the key file's own fsync and before any answer.
"""


class SyncHold:
    def __init__(self) -> None:
        self.holding = False
        self._held: list = []  # writers with a sync due, each once, in the order they wrote

    def take(self, writer) -> bool:
        """``writer``'s fsync is due: True when it is held (``release``
        syncs it), False when the writer syncs now, as usual."""
        if not self.holding:
            return False
        if writer not in self._held:
            self._held.append(writer)
        return True

    def hold(self) -> None:
        self.holding = True

    def release(self) -> None:
        """Sync what was taken, in order. Raises the first ``OSError``; the
        writers after it are synced all the same."""
        held, self._held = self._held, []
        self.holding = False
        failure: OSError | None = None
        for writer in held:
            try:
                writer.sync()
            except OSError as error:
                failure = failure or error
        if failure is not None:
            raise failure
