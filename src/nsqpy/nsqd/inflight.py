"""A channel's in-flight messages, found by id and by deadline.

NSQ's channel keeps its in-flight messages in a map by id and a heap by
deadline, side by side. The heap's cost in Python (a sift per delivery and
per FIN) is avoidable: messages started with the same timeout (a client's
msg_timeout) expire in the order they were started, so each timeout gets an
insertion-ordered dict, read from the front by the scan, and a FIN removes
its entry in O(1). Only a TOUCH clamped by ``--max-msg-timeout`` gives a
message an earlier deadline than its place says; those few wait in a heap
(whose entries for messages answered meanwhile are skipped when they come up).

The channel is the only user: it decides who may answer a message and keeps
the clients' counts; this class only keeps the messages and their deadlines.
"""

import heapq
import itertools

from .message import Message


class InFlight:
    def __init__(self):
        self._messages: dict[bytes, Message] = {}
        self._by_timeout: dict[float, dict[bytes, Message]] = {}  # each in deadline order
        self._clamped: list[tuple[float, int, Message]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._messages)

    def __contains__(self, message_id: bytes) -> bool:
        return message_id in self._messages

    @property
    def ids(self):
        """A live view of the ids in flight (for a loop that asks per message)."""
        return self._messages.keys()

    def get(self, message_id: bytes) -> Message | None:
        return self._messages.get(message_id)

    def start(self, message: Message, client, now: float, timeout: float) -> None:
        message.client = client
        message.delivered_at = now
        message.deadline = now + timeout
        message.timeout = timeout
        self._messages[message.id] = message
        queue = self._by_timeout.get(timeout)
        if queue is None:
            queue = self._by_timeout[timeout] = {}
        queue[message.id] = message

    def remove(self, message_id: bytes) -> Message:
        """Take ``message_id`` out (it must be in flight); its ``client`` is left for the caller."""
        message = self._messages.pop(message_id)
        self._by_timeout[message.timeout].pop(message_id, None)
        return message

    def take(self, message_id: bytes, client) -> Message | None:
        """Take ``message_id`` out if ``client`` holds it (a FIN's or REQ's
        one lookup); None otherwise, and nothing changes."""
        message = self._messages.get(message_id)
        if message is None or message.client is not client:
            return None
        del self._messages[message_id]
        self._by_timeout[message.timeout].pop(message_id, None)
        return message

    def touch(self, message: Message, now: float, max_msg_timeout: float) -> None:
        """A new deadline: the message's timeout from now, but never past
        ``max_msg_timeout`` after it was delivered (NSQ's rule)."""
        queue = self._by_timeout[message.timeout]
        queue.pop(message.id, None)
        deadline = now + message.timeout
        ceiling = message.delivered_at + max_msg_timeout
        if deadline <= ceiling:
            message.deadline = deadline
            queue[message.id] = message  # the latest of its timeout: the back is its place
        else:
            message.deadline = ceiling
            heapq.heappush(self._clamped, (ceiling, next(self._order), message))

    def expired(self, now: float) -> list[Message]:
        """Take out and return every message whose deadline has passed."""
        messages = self._messages
        expired = []
        for queue in self._by_timeout.values():
            while queue:
                message = next(iter(queue.values()))
                if message.deadline > now:
                    break
                del queue[message.id]
                del messages[message.id]
                expired.append(message)
        clamped = self._clamped
        while clamped and clamped[0][0] <= now:
            deadline, _, message = heapq.heappop(clamped)
            if messages.get(message.id) is message and message.deadline == deadline:
                del messages[message.id]
                expired.append(message)
        return expired

    def remove_client(self, client) -> list[Message]:
        """Take out every message ``client`` holds (it went away)."""
        held = [m for m in self._messages.values() if m.client is client]
        for message in held:
            self.remove(message.id)
        return held

    def clear(self) -> list[Message]:
        """Take out everything, for the channel's close or empty."""
        held = list(self._messages.values())
        self._messages.clear()
        self._by_timeout.clear()
        self._clamped.clear()
        return held
