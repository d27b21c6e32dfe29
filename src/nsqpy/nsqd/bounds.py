"""Bounded queues: a topic or a channel that holds at most ``max_depth``
messages (memory and disk together), and what happens beyond.

Beyond NSQ (nsqio/nsq#1396): NSQ queues until the disk is full. Here a
limit has a policy: ``reject`` refuses the publish (PUB, MPUB and DPUB get
``E_PUB_FAILED`` and friends with a reason naming the queue and its limit,
HTTP 503; an MPUB is refused whole) until consumers drain the queue, or
``drop-oldest`` makes room by dropping the messages next in line, counted.
``--max-depth`` and ``--full-policy`` give the defaults (0: unbounded, as
NSQ); ``/topic/config`` and ``/channel/config`` set them per queue.
"""

from collections.abc import Callable
from typing import Any

from ..options import int_in_range, one_of

FULL_POLICIES = ("reject", "drop-oldest")
MAX_DEPTH_LIMIT = 1 << 62


class QueueFull(Exception):
    """A ``reject`` limit refused a publish; the message says which and why."""


def parse_max_depth(text: str) -> int:
    return int_in_range("max_depth", text, MAX_DEPTH_LIMIT)


def parse_full_policy(text: str) -> str:
    return one_of("full_policy", text, FULL_POLICIES)


class DepthLimit:
    """One topic's or channel's limit: its own settings (None: the flags'
    defaults) and the count of messages it dropped. ``what`` names the queue
    in a refusal (``topic t``, ``channel t/c``), made once, not per publish."""

    __slots__ = ("what", "default_max_depth", "default_policy", "max_depth_setting", "policy_setting", "dropped",
                 "drops", "rejects")

    def __init__(self, what: str, default_max_depth: int = 0, default_policy: str = "reject"):
        self.what = what
        self.default_max_depth = default_max_depth
        self.default_policy = default_policy
        self.max_depth_setting: int | None = None
        self.policy_setting: str | None = None
        self.dropped = 0
        self.drops = False  # drop-oldest with a limit: what a put checks before calling trim
        self.rejects = False  # reject with a limit: what a publish checks before calling check
        self._update()

    @property
    def max_depth(self) -> int:
        return self.default_max_depth if self.max_depth_setting is None else self.max_depth_setting

    @property
    def policy(self) -> str:
        return self.policy_setting or self.default_policy

    def configure(self, max_depth: int | None, policy: str | None) -> None:
        if max_depth is not None:
            self.max_depth_setting = max_depth
        if policy is not None:
            self.policy_setting = policy
        self._update()

    def _update(self) -> None:
        self.drops = bool(self.max_depth) and self.policy == "drop-oldest"
        self.rejects = bool(self.max_depth) and self.policy == "reject"

    def check(self, depth: int, incoming: int) -> None:
        """Raise ``QueueFull`` if ``incoming`` more would pass a ``reject`` limit."""
        max_depth = self.max_depth
        if self.rejects and depth + incoming > max_depth:
            raise QueueFull(f"{self.what} is full (depth {depth}, max_depth {max_depth})")

    def trim(self, queue, dropped: Callable[[Any], None] | None = None) -> None:
        """``drop-oldest``, after a put: drop the messages next in line until
        the queue is back within the limit, each handed to ``dropped``. The
        put comes first so that a batch larger than the limit loses its own
        oldest messages too."""
        if not self.drops:
            return
        max_depth = self.max_depth
        while len(queue) > max_depth:
            message = queue.pop()
            if message is None:
                return
            queue.ack(message)
            self.dropped += 1
            if dropped is not None:
                dropped(message)

    def config(self) -> dict:
        return {"max_depth": self.max_depth, "full_policy": self.policy}
