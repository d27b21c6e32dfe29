"""What nsqadmin knows of the cluster: the nodes (from nsqlookupd, or the
static ``--nsqd-http-address`` list) and their stats, fetched concurrently.

Every call answers ``(value, errors)``: the errors are one line per daemon
that failed, so the API can answer with a ``WARNING:`` while some daemons
still answered; ``AllFailed`` is raised when none did (``UPSTREAM_ERROR``).
"""

import asyncio
import dataclasses
import re
import time

from . import aggregate
from .upstream import Upstream, UpstreamError, daemon_url

_SEMVER = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
INFO_CACHE_SECONDS = 10.0


class AllFailed(Exception):
    """No daemon of the kind asked answered; the text says which and why."""


class Refused(Exception):
    """Every nsqd asked refused the value given (a 4xx answer), so none
    changed anything; the text is their own reasons, one line each."""


def semver(text: str) -> tuple[int, int, int]:
    """Go's nsqadmin parses versions as semver; anything else counts as 0.0.0."""
    match = _SEMVER.match(text or "")
    return tuple(int(part) for part in match.groups()) if match else (0, 0, 0)


@dataclasses.dataclass
class Producer:
    """One nsqd as nsqlookupd (or its own /info) describes it."""
    broadcast_address: str
    http_port: int
    tcp_port: int = 0
    hostname: str = ""
    version: str = ""
    address: str = ""  # where nsqadmin reaches its HTTP API
    remote_addresses: list[str] = dataclasses.field(default_factory=list)
    topics: dict[str, bool] = dataclasses.field(default_factory=dict)  # topic -> tombstoned

    @property
    def node(self) -> str:
        host = self.broadcast_address
        return f"[{host}]:{self.http_port}" if ":" in host else f"{host}:{self.http_port}"

    def __post_init__(self):
        self.address = self.address or self.node

    def api_entry(self, newest: tuple) -> dict:
        """One row of ``/api/nodes``."""
        remote = self.remote_addresses
        return {"remote_addresses": remote or None,
                "remote_address": remote[0].rpartition("/")[2] if remote else "",
                "hostname": self.hostname, "broadcast_address": self.broadcast_address,
                "tcp_port": self.tcp_port, "http_port": self.http_port, "version": self.version,
                "topics": [{"topic": t, "tombstoned": self.topics[t]} for t in sorted(self.topics)],
                "out_of_date": semver(self.version) < newest}


def _producer_from_peer(peer: dict) -> Producer:
    return Producer(broadcast_address=peer.get("broadcast_address", ""), http_port=peer.get("http_port", 0),
                    tcp_port=peer.get("tcp_port", 0), hostname=peer.get("hostname", ""),
                    version=peer.get("version", ""))


def _merge_producer(found: dict[str, Producer], peer: dict, lookupd: str) -> Producer:
    producer = _producer_from_peer(peer)
    producer = found.setdefault(producer.node, producer)
    if peer.get("remote_address"):
        producer.remote_addresses.append(f"{lookupd}/{peer['remote_address']}")
    return producer


async def gather(calls: dict) -> tuple[dict, list[str]]:
    """Run ``{key: awaitable}`` concurrently -> ``({key: result}, [errors])``."""
    keys = list(calls)
    results = await asyncio.gather(*calls.values(), return_exceptions=True)
    values, errors = {}, []
    for key, result in zip(keys, results):
        if isinstance(result, UpstreamError):
            errors.append(str(result))
        elif isinstance(result, BaseException):
            raise result
        else:
            values[key] = result
    return values, errors


def require_some(values: dict, errors: list[str], what: str) -> None:
    if errors and not values:
        raise AllFailed(f"failed to query any {what}: {'; '.join(errors)}")


class ClusterInfo:
    def __init__(self, options, upstream: Upstream):
        self.options = options
        self.upstream = upstream
        self._info_cache: dict[str, tuple[float, Producer]] = {}

    @property
    def lookupds(self) -> list[str]:
        return self.options.nsqlookupd_http_addresses

    @property
    def uses_lookupd(self) -> bool:
        return bool(self.lookupds)

    async def _lookupd_get(self, path: str, **params) -> tuple[dict, list[str]]:
        """GET ``path`` on every lookupd -> ({lookupd: json}, errors)."""
        calls = {lookupd: self.upstream.get_json(daemon_url(lookupd, path), params or None)
                 for lookupd in self.lookupds}
        answers, errors = await gather(calls)
        require_some(answers, errors, "nsqlookupd")
        return answers, errors

    # --- nodes ---------------------------------------------------------------------------------

    async def _nsqd_info(self, address: str) -> Producer:
        cached = self._info_cache.get(address)
        if cached and time.monotonic() - cached[0] < INFO_CACHE_SECONDS:
            return cached[1]
        info = await self.upstream.get_json(daemon_url(address, "/info"))
        producer = _producer_from_peer(info)
        producer.address = address
        self._info_cache[address] = (time.monotonic(), producer)
        return producer

    async def _static_nsqds(self) -> tuple[list[Producer], list[str]]:
        found, errors = await gather({a: self._nsqd_info(a) for a in self.options.nsqd_http_addresses})
        require_some(found, errors, "nsqd")
        return [dataclasses.replace(p, topics={}) for p in found.values()], errors

    async def producers(self) -> tuple[list[Producer], list[str]]:
        """Every nsqd with the topics it has (and which are tombstoned)."""
        if not self.uses_lookupd:
            producers, errors = await self._static_nsqds()
            stats, stats_errors = await self.node_stats(producers, include_clients=False)
            for producer in producers:
                for topic in stats.get(producer.node, ()):
                    producer.topics[topic["topic_name"]] = False
            return sorted(producers, key=lambda p: p.node), errors + stats_errors
        answers, errors = await self._lookupd_get("/nodes")
        found: dict[str, Producer] = {}
        for lookupd, answer in answers.items():
            for peer in answer.get("producers") or ():
                producer = _merge_producer(found, peer, lookupd)
                for topic, tombstoned in zip(peer.get("topics") or (), peer.get("tombstones") or ()):
                    producer.topics[topic] = producer.topics.get(topic, False) or tombstoned
        return sorted(found.values(), key=lambda p: p.node), errors

    async def _lookup(self, topic: str) -> tuple[dict[str, dict], list[str]]:
        """``/lookup?topic=`` on every lookupd -> ({lookupd: answer}, errors),
        only the lookupds that know the topic answering (a 404 is an answer
        that it does not, not a failure)."""
        calls = {lookupd: self.upstream.get_json(daemon_url(lookupd, "/lookup"), {"topic": topic})
                 for lookupd in self.lookupds}
        results = await asyncio.gather(*calls.values(), return_exceptions=True)
        answers, errors, answered = {}, [], 0
        for lookupd, result in zip(calls, results):
            if isinstance(result, UpstreamError) and result.status == 404:
                answered += 1  # this lookupd has no such topic: an answer, not a failure
            elif isinstance(result, UpstreamError):
                errors.append(str(result))
            elif isinstance(result, BaseException):
                raise result
            else:
                answered += 1
                answers[lookupd] = result
        if not answered:
            raise AllFailed(f"failed to query any nsqlookupd: {'; '.join(errors)}")
        return answers, errors

    async def topic_producers(self, topic: str) -> tuple[list[Producer], list[str]]:
        """The nsqd that have ``topic`` (all of them in --nsqd-http-address mode:
        their stats filtered by topic tell)."""
        if not self.uses_lookupd:
            return await self._static_nsqds()
        answers, errors = await self._lookup(topic)
        found: dict[str, Producer] = {}
        for lookupd, answer in answers.items():
            for peer in answer.get("producers") or ():
                _merge_producer(found, peer, lookupd)
        return sorted(found.values(), key=lambda p: p.node), errors

    async def registered_channels(self, topic: str) -> tuple[list[str] | None, list[str]]:
        """The channels nsqlookupd lists for ``topic``; None when no lookupd
        knows the topic (or nsqadmin uses no lookupd)."""
        if not self.uses_lookupd:
            return None, []
        answers, errors = await self._lookup(topic)
        if not answers:
            return None, errors
        return sorted({c for answer in answers.values() for c in answer.get("channels") or ()}), errors

    async def find_producer(self, node: str) -> tuple[Producer | None, list[str]]:
        producers, errors = await self.producers()
        return next((p for p in producers if p.node == node), None), errors

    # --- topics --------------------------------------------------------------------------------

    async def topics(self) -> tuple[list[str], list[str]]:
        if not self.uses_lookupd:
            producers, errors = await self.producers()
            return sorted({t for p in producers for t in p.topics}), errors
        answers, errors = await self._lookupd_get("/topics")
        return sorted({t for answer in answers.values() for t in answer.get("topics") or ()}), errors

    async def inactive_topics(self) -> tuple[dict[str, list[str]], list[str]]:
        """Topics nsqlookupd knows that no nsqd produces, with their channels."""
        if not self.uses_lookupd:
            return {}, []
        topics, errors = await self.topics()
        lookups = await asyncio.gather(*(self.topic_producers(t) for t in topics), return_exceptions=True)
        idle = []
        for topic, lookup in zip(topics, lookups):
            if isinstance(lookup, AllFailed):
                errors.append(str(lookup))
            elif isinstance(lookup, BaseException):
                raise lookup
            elif not lookup[0]:
                idle.append(topic)
        channel_lists = await asyncio.gather(*(self.topic_channels(t) for t in idle))
        inactive = {}
        for topic, (channels, channel_errors) in zip(idle, channel_lists):
            inactive[topic] = channels
            errors.extend(channel_errors)
        return inactive, errors

    async def topic_channels(self, topic: str) -> tuple[list[str], list[str]]:
        answers, errors = await self._lookupd_get("/channels", topic=topic)
        return sorted({c for answer in answers.values() for c in answer.get("channels") or ()}), errors

    # --- stats ---------------------------------------------------------------------------------

    async def _stats_of(self, producer: Producer, params: dict, now: float) -> list[dict]:
        answer = await self.upstream.get_json(daemon_url(producer.address, "/stats"), params)
        return [aggregate.topic_stats(producer.node, producer.hostname, raw, now)
                for raw in answer.get("topics") or ()]

    async def node_stats(self, producers: list[Producer], topic: str | None = None, channel: str | None = None,
                         include_clients: bool = True) -> tuple[dict[str, list[dict]], list[str]]:
        """{node: [topic_stats...]} from every producer's /stats, concurrently."""
        params = {"format": "json", "include_mem": "false"}
        if topic:
            params["topic"] = topic
        if channel:
            params["channel"] = channel
        if not include_clients:
            params["include_clients"] = "false"
        now = time.time()
        stats, errors = await gather({p.node: self._stats_of(p, params, now) for p in producers})
        require_some(stats, errors, "nsqd")
        return stats, errors

    async def node_entries(self) -> tuple[list[dict], list[dict], list[str]]:
        """``/api/nodes``' rows: every nsqd, with a replicated one's state
        in brief (``replication``; None for an nsqd that does not replicate
        or did not answer); and the nodes that left the cluster, as the
        replicated ones saw them (aggregate.departed_nodes)."""
        producers, errors = await self.producers()
        newest = max((semver(p.version) for p in producers), default=(0, 0, 0))
        params = {"format": "json", "include_mem": "false", "include_clients": "false"}
        answers, stats_errors = await gather({p.node: self.upstream.get_json(daemon_url(p.address, "/stats"), params)
                                              for p in producers})
        states = {node: answer.get("replication") for node, answer in answers.items()}
        return ([{**p.api_entry(newest), "replication": aggregate.replication_brief(states.get(p.node))}
                 for p in producers], aggregate.departed_nodes(list(states.values())), errors + stats_errors)

    async def node_detail(self, producer: Producer) -> tuple[list[dict], dict | None, list[str]]:
        """One node's topic stats, and its replication state when it is a
        replicated nsqd (the ``replication`` section of its /stats)."""
        params = {"format": "json", "include_mem": "false"}
        answers, errors = await gather({producer.node: self.upstream.get_json(
            daemon_url(producer.address, "/stats"), params)})
        require_some(answers, errors, "nsqd")
        answer = answers.get(producer.node) or {}
        now = time.time()
        topics = [aggregate.topic_stats(producer.node, producer.hostname, raw, now)
                  for raw in answer.get("topics") or ()]
        return topics, answer.get("replication"), errors

    async def topic_stats(self, topic: str, channel: str | None = None) -> tuple[list[dict], list[str]]:
        """The per-node stats of one topic (or one channel of it)."""
        producers, errors = await self.topic_producers(topic)
        stats, stats_errors = await self.node_stats(producers, topic, channel, include_clients=channel is not None)
        return [t for topics in stats.values() for t in topics if t["topic_name"] == topic], errors + stats_errors

    # --- actions -------------------------------------------------------------------------------

    async def _post_all(self, targets: list[str], path: str, what: str, ignore_missing: bool = False,
                        **params) -> list[str]:
        async def post(address):
            try:
                await self.upstream.post(address, path, **params)
            except UpstreamError as error:
                if not (ignore_missing and error.status == 404):
                    raise
        done, errors = await gather({address: post(address) for address in targets})
        require_some(done, errors, what)
        return errors

    async def create_topic_channel(self, topic: str, channel: str | None) -> list[str]:
        """On every lookupd (and, for a channel, on the nsqd producing the
        topic); with a static nsqd list, on every nsqd."""
        if not self.uses_lookupd:
            nsqds = self.options.nsqd_http_addresses
            errors = await self._post_all(nsqds, "/topic/create", "nsqd", topic=topic)
            if channel:
                errors += await self._post_all(nsqds, "/channel/create", "nsqd", topic=topic, channel=channel)
            return errors
        errors = await self._post_all(self.lookupds, "/topic/create", "nsqlookupd", topic=topic)
        if channel:
            errors += await self._post_all(self.lookupds, "/channel/create", "nsqlookupd",
                                           topic=topic, channel=channel)
            producers, lookup_errors = await self.topic_producers(topic)
            errors += lookup_errors
            if producers:
                errors += await self._post_all([p.address for p in producers], "/channel/create", "nsqd",
                                               topic=topic, channel=channel)
        return errors

    async def delete_topic(self, topic: str) -> list[str]:
        producers, errors = await self.topic_producers(topic)  # before lookupd forgets them
        if self.uses_lookupd:
            errors += await self._post_all(self.lookupds, "/topic/delete", "nsqlookupd", topic=topic)
        if producers:
            errors += await self._post_all([p.address for p in producers], "/topic/delete", "nsqd",
                                           ignore_missing=True, topic=topic)
        return errors

    async def delete_channel(self, topic: str, channel: str) -> list[str]:
        producers, errors = await self.topic_producers(topic)
        if self.uses_lookupd:
            errors += await self._post_all(self.lookupds, "/channel/delete", "nsqlookupd", ignore_missing=True,
                                           topic=topic, channel=channel)
        if producers:
            errors += await self._post_all([p.address for p in producers], "/channel/delete", "nsqd",
                                           ignore_missing=True, topic=topic, channel=channel)
        return errors

    async def topic_action(self, topic: str, action: str, channel: str | None = None) -> list[str]:
        """pause / unpause / empty a topic (or a channel) on every nsqd that has it."""
        producers, errors = await self.topic_producers(topic)
        if not producers:
            return errors
        if channel is None:
            return errors + await self._post_all([p.address for p in producers], f"/topic/{action}", "nsqd",
                                                 ignore_missing=True, topic=topic)
        return errors + await self._post_all([p.address for p in producers], f"/channel/{action}", "nsqd",
                                             ignore_missing=True, topic=topic, channel=channel)

    async def replay_channel(self, topic: str, channel: str, start: str) -> list[str]:
        """Beyond NSQ: ``channel`` delivers its retained topic's log again
        from ``start`` on every nsqd that has it (nsqd's ``/channel/rewind``).
        nsqd checks the value before it changes anything, so a value every
        nsqd refuses changed nothing: ``Refused`` says why, in nsqd's words.
        A value only some refuse (an offset past one node's log) is a
        warning naming them, as any node failing an action is."""
        producers, errors = await self.topic_producers(topic)
        refusals: list[str] = []

        async def rewind(address: str) -> bool:
            try:
                await self.upstream.post(address, "/channel/rewind", topic=topic, channel=channel,
                                         **{"from": start})
            except UpstreamError as error:
                if error.status == 404:
                    return False  # this nsqd does not have the channel
                if 400 <= error.status < 500:
                    refusals.append(error.reason)
                raise
            return True

        replayed, failures = await gather({p.address: rewind(p.address) for p in producers})
        if refusals and not any(replayed.values()):
            raise Refused("; ".join(dict.fromkeys(refusals)))
        require_some(replayed, failures, "nsqd")
        return errors + failures

    async def tombstone_topic(self, topic: str, node: str) -> list[str]:
        """Hide ``node`` from consumers of ``topic`` on every lookupd, then delete
        the topic on that nsqd (consumers stop reconnecting to it meanwhile)."""
        producer, errors = await self.find_producer(node)
        if producer is None:
            raise LookupError(node)
        errors += await self._post_all(self.lookupds, "/topic/tombstone", "nsqlookupd", topic=topic, node=node)
        errors += await self._post_all([producer.address], "/topic/delete", "nsqd", ignore_missing=True,
                                       topic=topic)
        return errors
