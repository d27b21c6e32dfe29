"""Which nsqd a publish goes to: the Producer's choice among many nodes, sans-IO.

NSQ leaves a producer tied to one nsqd. Here a Producer spreads its
publishes over several, and a node that fails (refused or dropped
connection, no answer in time, ``E_PUB_FAILED``) is set aside until it
answers again; the Producer probes it in the background, waiting longer
after each failure in a row. This module only decides; the Producer does
the I/O and reports what happened.
"""

from collections.abc import Container, Iterable

from .errors import InvalidArgumentError

STRATEGIES = ("round-robin", "least-pending")
MIN_RETRY_DELAY = 0.25
MAX_RETRY_DELAY = 15.0


class Node:
    """One nsqd as the Producer sees it."""

    __slots__ = ("address", "up", "failures", "pending", "published", "last_error")

    def __init__(self, address: str):
        self.address = address
        self.up = True  # until it fails; a new node is tried at once
        self.failures = 0  # in a row
        self.pending = 0  # publishes sent and not yet answered
        self.published = 0  # publishes it acknowledged
        self.last_error = ""

    def __repr__(self) -> str:
        return f"Node({self.address}, {'up' if self.up else 'down'}, pending={self.pending})"


def retry_delay(failures: int) -> float:
    """Seconds before probing a node that failed ``failures`` times in a row."""
    delay: float = MIN_RETRY_DELAY * 2 ** min(max(0, failures - 1), 32)  # past the cap long before 2**32
    return min(MAX_RETRY_DELAY, delay)


class NodePool:
    """The nodes, their health, and the choice of one for each publish.

    ``round-robin`` takes the healthy nodes in turn; ``least-pending`` the one
    with the fewest unanswered publishes (in turn among equals), which steers
    around a slow node. With ``sticky`` a topic keeps the node it was first
    given while that node stays up, so its messages keep their order on one
    nsqd. The first choice is the first address given: a caller can name a
    preferred node and keep the others as fallbacks.
    """

    def __init__(self, addresses: Iterable[str] = (), strategy: str = "round-robin", sticky: bool = False):
        if strategy not in STRATEGIES:
            raise InvalidArgumentError(f"strategy must be one of {', '.join(STRATEGIES)} (got {strategy!r})")
        self.strategy = strategy
        self.sticky = sticky
        self.nodes: dict[str, Node] = {}
        self._turn = 0
        self._topic_node: dict[str, Node] = {}
        self.set_addresses(addresses)

    def __len__(self) -> int:
        return len(self.nodes)

    def set_addresses(self, addresses: Iterable[str]) -> list[Node]:
        """Follow a new list (from nsqlookupd): new nodes join, nodes no longer
        listed leave. Returns the nodes that left, for their connections to close."""
        wanted = list(dict.fromkeys(addresses))
        gone = [node for address, node in self.nodes.items() if address not in wanted]
        self.nodes = {address: self.nodes.get(address) or Node(address) for address in wanted}
        for node in gone:
            self._unstick(node)
        return gone

    def choose(self, topic: str, exclude: Container[Node] = ()) -> Node | None:
        """A healthy node not in ``exclude`` (the nodes already tried or
        holding a copy of this publish), or None when there is none."""
        if self.sticky:
            node = self._topic_node.get(topic)
            if node is not None and node.up and node not in exclude and node.address in self.nodes:
                return node
        # the nodes in turn, from the one after the last chosen: each copy of a publish with
        # replicas takes the next node, and a node that is down or holds a copy is passed over
        # without its share falling to its neighbour
        nodes = list(self.nodes.values())
        if not nodes:
            return None
        start = self._turn % len(nodes)
        candidates = [node for node in nodes[start:] + nodes[:start] if node.up and node not in exclude]
        if not candidates:
            return None
        node = min(candidates, key=lambda n: n.pending) if self.strategy == "least-pending" else candidates[0]
        self._turn = nodes.index(node) + 1
        if self.sticky:
            self._topic_node[topic] = node
        return node

    def failed(self, node: Node, reason: str) -> float:
        """``node`` failed a publish or a probe: it is down; returns the
        seconds to wait before probing it again."""
        node.up = False
        node.failures += 1
        node.last_error = reason
        self._unstick(node)
        return retry_delay(node.failures)

    def succeeded(self, node: Node) -> None:
        node.up = True
        node.failures = 0

    def any_up(self) -> bool:
        return any(node.up for node in self.nodes.values())

    def _unstick(self, node: Node) -> None:
        for topic in [t for t, n in self._topic_node.items() if n is node]:
            del self._topic_node[topic]
