"""How many messages wait for a channel, from nsqd's ``/stats``.

"Available now" means what the channel holds when the query starts, and the
archive job's lag is the same figure while it runs. A topic without the
channel yet counts the topic's own depth: the first channel receives it.
"""

import json
import urllib.parse
import urllib.request

from ..client.discovery import NSQ_ACCEPT, lookup_url

_TIMEOUT = 5.0


def _get_json(url: str) -> dict:
    request = urllib.request.Request(url, headers=NSQ_ACCEPT)
    with urllib.request.urlopen(request, timeout=_TIMEOUT) as response:
        return json.load(response)


def _http_url(address: str) -> str:
    return address if "://" in address else f"http://{address}"


def nsqd_http_addresses(lookupd_addresses, topic: str) -> list[str]:
    """``host:http_port`` of every nsqd any lookupd lists for ``topic``."""
    found = []
    for lookupd in lookupd_addresses:
        url = lookup_url(lookupd) + "?" + urllib.parse.urlencode({"topic": topic})
        try:
            producers = _get_json(url).get("producers") or []
        except OSError:  # a lookupd down, or the topic unknown (404)
            continue
        for producer in producers:
            address = f"{producer['broadcast_address']}:{producer['http_port']}"
            if address not in found:
                found.append(address)
    return found


def channel_backlog(http_addresses, topic: str, channel: str) -> int:
    """Messages ready for ``channel`` (queued: neither deferred nor in flight)
    summed over the nodes; a node that does not answer counts as empty."""
    total = 0
    for address in http_addresses:
        query = urllib.parse.urlencode({"format": "json", "topic": topic, "include_clients": "false",
                                        "include_mem": "false"})
        try:
            topics = _get_json(f"{_http_url(address)}/stats?{query}").get("topics") or []
        except OSError:
            continue
        for entry in topics:
            channels = {c["channel_name"]: c for c in entry.get("channels") or []}
            if channel in channels:
                total += channels[channel]["depth"]
            elif not channels:
                total += entry["depth"]
    return total
