"""How many messages wait for a channel, from nsqd's ``/stats``.

"Available now" means what the channel holds ready when the query starts.
The archive job's lag is everything not yet acknowledged: ready, in flight
(the batch being written is in flight until it commits) and deferred. A
topic without the channel yet counts the topic's own depth: the first
channel receives it.

Both need nsqd's HTTP address: given, listed by nsqlookupd, or found next
to a TCP address (nsqd's ``/info`` names its TCP port, so a guess is
confirmed, never assumed).
"""

import http.client
import json
import urllib.parse
import urllib.request
from dataclasses import dataclass

from ..client.discovery import NSQ_ACCEPT, lookup_url
from ..net import split_host_port

_TIMEOUT = 5.0


def _get_json(url: str) -> dict:
    request = urllib.request.Request(url, headers=NSQ_ACCEPT)
    with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
        return json.load(response)


def _http_url(address: str) -> str:
    return address if "://" in address else f"http://{address}"


def _producers(lookupd_addresses, topic: str) -> list[dict]:
    """Every nsqd any lookupd lists for ``topic`` (lookupds that fail are skipped)."""
    found = []
    for lookupd in lookupd_addresses:
        url = lookup_url(lookupd) + "?" + urllib.parse.urlencode({"topic": topic})
        try:
            found.extend(_get_json(url).get("producers") or [])
        except OSError:  # a lookupd down, or the topic unknown (404)
            continue
    return found


def nsqd_http_addresses(lookupd_addresses, topic: str) -> list[str]:
    """``host:http_port`` of every nsqd any lookupd lists for ``topic``."""
    found = []
    for producer in _producers(lookupd_addresses, topic):
        address = f"{producer['broadcast_address']}:{producer['http_port']}"
        if address not in found:
            found.append(address)
    return found


@dataclass(frozen=True)
class Node:
    """One nsqd as the executors reader plans it: where to read, where to ask its depth."""
    tcp_address: str
    http_address: str | None


def find_nodes(nsqd_tcp, nsqd_http, lookupd_http, topic: str) -> list[Node]:
    """The nsqd given (their HTTP addresses in the same order, or found
    beside the TCP port) and those nsqlookupd lists for ``topic``."""
    if len(nsqd_http) == len(nsqd_tcp):
        nodes = [Node(tcp, http) for tcp, http in zip(nsqd_tcp, nsqd_http)]
    else:
        nodes = [Node(tcp, http_address_beside(tcp)) for tcp in nsqd_tcp]
    known = {node.tcp_address for node in nodes}
    for producer in _producers(lookupd_http, topic):
        host = producer["broadcast_address"]
        node = Node(f"{host}:{producer['tcp_port']}", f"{host}:{producer['http_port']}")
        if node.tcp_address not in known:
            known.add(node.tcp_address)
            nodes.append(node)
    return nodes


def http_address_beside(tcp_address: str) -> str | None:
    """nsqd's HTTP address when it listens on the TCP port + 1 (NSQ's
    4150/4151 layout) and its ``/info`` confirms that TCP port."""
    try:
        host, port = split_host_port(tcp_address)
        candidate = f"{host}:{port + 1}"
        info = _get_json(f"http://{candidate}/info")
    except (OSError, ValueError, http.client.HTTPException):  # nothing there, or another program that is no nsqd
        return None
    return candidate if isinstance(info, dict) and info.get("tcp_port") == port else None


def find_http_addresses(nsqd_http, lookupd_http, nsqd_tcp, topic: str) -> list[str]:
    """nsqd's HTTP addresses: the ones given, else those nsqlookupd lists,
    else the ones found beside the TCP addresses (empty when none is known)."""
    if nsqd_http:
        return list(nsqd_http)
    found = nsqd_http_addresses(lookupd_http, topic)
    if found:
        return found
    return [address for address in map(http_address_beside, nsqd_tcp) if address]


def _channel_counts(http_addresses, topic: str, channel: str, fields: tuple[str, ...]) -> int | None:
    """``fields`` of the channel summed over the nodes (the topic's depth
    while the channel does not exist); None when a node does not answer."""
    total = 0
    for address in http_addresses:
        query = urllib.parse.urlencode({"format": "json", "topic": topic, "include_clients": "false",
                                        "include_mem": "false"})
        try:
            topics = _get_json(f"{_http_url(address)}/stats?{query}").get("topics") or []
        except OSError:
            return None
        for entry in topics:
            channels = {c["channel_name"]: c for c in entry.get("channels") or []}
            if channel in channels:
                total += sum(channels[channel][field] for field in fields)
            elif not channels:
                total += entry["depth"]
    return total


def channel_backlog(http_addresses, topic: str, channel: str) -> int:
    """Messages ready for ``channel`` (neither deferred nor in flight) summed
    over the nodes; a node that does not answer counts as empty."""
    return sum(node_backlog(address, topic, channel) or 0 for address in http_addresses)


def node_backlog(http_address: str, topic: str, channel: str) -> int | None:
    """Messages ready for ``channel`` on one nsqd; None when it does not answer."""
    return _channel_counts([http_address], topic, channel, ("depth",))


def channel_lag(http_addresses, topic: str, channel: str) -> int | None:
    """Messages ``channel`` has not acknowledged: ready, in flight and
    deferred; None when a node does not answer (its share is unknown)."""
    return _channel_counts(http_addresses, topic, channel, ("depth", "in_flight_count", "deferred_count"))


@dataclass(frozen=True)
class Holder:
    """A consumer of the channel holding messages in flight, as nsqd's ``/stats`` names it."""
    nsqd_http_address: str
    client: str  # hostname, client_id and remote address
    in_flight: int

    def __str__(self) -> str:
        return f"{self.client} on nsqd {self.nsqd_http_address}: {self.in_flight}"


def holders(http_addresses, topic: str, channel: str, other_than: str | None = None) -> list[Holder]:
    """Every consumer of ``channel`` with messages in flight (nodes that do
    not answer are left out), but those whose client_id is ``other_than``
    (this job's own connections, which may still be closing when it asks)."""
    found = []
    query = urllib.parse.urlencode({"format": "json", "topic": topic, "channel": channel,
                                    "include_clients": "true", "include_mem": "false"})
    for address in http_addresses:
        try:
            topics = _get_json(f"{_http_url(address)}/stats?{query}").get("topics") or []
        except OSError:
            continue
        for entry in topics:
            for each in entry.get("channels") or []:
                if each["channel_name"] != channel:
                    continue
                for client in each.get("clients") or []:
                    if client.get("in_flight_count") and (other_than is None or
                                                          client.get("client_id") != other_than):
                        name = f"{client.get('hostname', '?')} (client_id {client.get('client_id', '?')!r}, " \
                               f"{client.get('remote_address', '?')})"
                        found.append(Holder(address, name, client["in_flight_count"]))
    return found


def held_elsewhere(http_addresses, topic: str, channel: str, client_id: str) -> int:
    """Messages of ``channel`` in flight to consumers other than those named
    ``client_id``: they come back to the channel when their consumer
    requeues them, drops its connection or lets them time out."""
    return sum(holder.in_flight for holder in holders(http_addresses, topic, channel, other_than=client_id))
