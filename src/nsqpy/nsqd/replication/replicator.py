"""The replicated nsqd's side of everything: what it sends its peers as an
origin, what it keeps for them as a peer, and the etcd loops (renewing
its lease, watching the members) that decide takeovers.

nsqd calls in at a handful of points: ``published`` (a topic queued
messages), ``done`` (a channel is through with a message), ``changed``
(a channel appeared, went, or was emptied), ``acks()`` (what a publish
waits for before its OK), ``receive`` (a peer's ``REPL`` batch).
"""

import asyncio
import json
import logging
import os
import time

from ...atomicfile import write_atomically
from ...errors import StartupError
from ...ratelog import RateLimitedLog
from ...protocol.commands import encode_mpub_body
from ...protocol.replication import (CHANNEL, PAUSED, ReplicationError, done_record, event_record,
                                     published_record, read_records)
from .etcd import Etcd, EtcdUnavailable
from .links import Acks, PeerLink
from .membership import Membership
from .shadow import Shadow
from .shadowlog import ShadowLogs
from .snapshot import owed_records
from .takeover import adopt, let_go

EPOCH_FILE = "nsqd.replication.json"
WATCH_INTERVAL = 0.5  # how often the members are read: a takeover starts this long after a lease ends
SETTLE_WAIT = 3.0
ADOPTIONS_KEPT = 64  # epochs taken over whose ids are kept, so a late hand-over adopts only what is new  # after a crash, how long a restarted node waits for a survivor to claim what it had


class Replicator:
    def __init__(self, nsqd):
        options = nsqd.options
        self.nsqd = nsqd
        self.log: logging.Logger = nsqd.log
        self.factor = options.replication_factor
        self.etcd = Etcd(options.etcd_endpoints, timeout=max(1.0, options.replication_lease / 3), log=self.log)
        self.lease_ttl = max(2, round(options.replication_lease))
        self.prefix = options.replication_prefix
        self.node = ""
        self.membership: Membership | None = None
        self.links: dict[str, PeerLink] = {}
        self.members: dict[str, dict] = {}
        self.shadows: dict[tuple[str, int], Shadow] = {}
        self.takeovers = 0
        self.adopted = 0
        self._adopted: dict[tuple[str, int], set[bytes]] = {}  # ids adopted per epoch taken over
        self.under_replicated = 0
        self.etcd_ok = False
        self.logs: ShadowLogs | None = None  # --replication-ack=disk: the shadows' logs
        self._acks: Acks | None = None
        self._ring: list[PeerLink] = []  # the peers that take this node's copies
        self._ring_nodes: set[str] = set()  # theirs, as last copied to under this epoch
        self._flush_scheduled = False
        self._tasks: list[asyncio.Task] = []
        # one line now and then for each recurring trouble
        self._etcd_trouble = RateLimitedLog(self.log)
        self._peer_trouble = RateLimitedLog(self.log)
        self._short_trouble = RateLimitedLog(self.log)

    @property
    def epoch(self) -> int:
        return self.membership.epoch if self.membership is not None else 0

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, node: str) -> None:
        """Settle what a previous run of this node left (taken over, or its
        own to keep), join the members, and start watching them."""
        self.node = node
        self.membership = Membership(self.etcd, self.prefix, node, self.lease_ttl)
        if self.nsqd.options.replication_ack == "disk":
            self.logs = ShadowLogs(self.nsqd.data_path, asyncio.get_running_loop())
            self._replay_logs()
        try:
            await self._settle_previous()
            await self._join()
        except EtcdUnavailable as error:
            self.log.error("REPLICATION: etcd unavailable (%s): accepting publishes without replicas "
                           "until it answers", error)
        self._tasks = [asyncio.get_running_loop().create_task(self._watch()),
                       asyncio.get_running_loop().create_task(self._renew())]

    def _replay_logs(self) -> None:
        """The copies this peer acknowledged before it stopped: each
        shadow as its batches built it, taken over at the first look at the
        members if its origin is gone."""
        for origin, epoch, payloads in self.logs.load():
            shadow = self.shadows[(origin, epoch)] = Shadow(origin, epoch)
            shadow.created = 0.0
            try:
                for payload in payloads:
                    shadow.apply(read_records(payload))
            except ReplicationError as error:
                self.log.error("REPLICATION: log of %s epoch %d: %s; kept what came before", origin, epoch, error)
            self.log.info("REPLICATION: %d copies of %s epoch %d read back from disk", len(shadow), origin, epoch)

    async def _join(self) -> None:
        nsqd = self.nsqd
        info = {"tcp": self.node, "http": f"{nsqd.options.broadcast_address}:{nsqd.http_port}",
                "node_id": nsqd.options.node_id}
        members = await self.membership.members()
        for other, registered in members.items():
            if registered.get("node_id") == nsqd.options.node_id:
                raise StartupError(f"--node-id {nsqd.options.node_id} is also the node id of replicated nsqd "
                                   f"{other}: message ids would collide; give each nsqd its own --node-id")
        epoch = await self.membership.join(info)
        write_atomically(os.path.join(nsqd.data_path, EPOCH_FILE),
                         json.dumps({"node": self.node, "epoch": epoch}).encode())
        self.etcd_ok = True
        self.log.info("REPLICATION: joined as %s, epoch %d, replication factor %d", self.node, epoch, self.factor)
        self._ring_nodes = set()  # copies made under an earlier epoch are not this one's
        self._update_links(members)

    async def _settle_previous(self) -> None:
        """The data dir holds what this node's last epoch accepted. If a
        survivor took that epoch over, it delivers it: drop ours. If nobody
        did (yet), end the old lease so that a survivor holding a copy
        claims it now, wait a moment for one, and keep ours if none does."""
        try:
            with open(os.path.join(self.nsqd.data_path, EPOCH_FILE)) as file:
                previous = json.load(file)
            node, epoch = previous["node"], int(previous["epoch"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        if node != self.node:
            return
        owner = await self.membership.owner(node, epoch)
        if owner is None:
            await self.membership.end_lease(epoch)
            deadline = time.monotonic() + SETTLE_WAIT
            while owner is None and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                owner = await self.membership.owner(node, epoch)
            if owner is None:
                owner = await self.membership.claim(node, epoch)
        if owner != self.node:
            dropped = let_go(self.nsqd)
            self.log.warning("REPLICATION: epoch %d of %s was taken over by %s: dropped the %d messages "
                             "it had left here", epoch, node, owner, dropped)

    async def stop(self) -> None:
        """A clean stop keeps this node's messages in its data dir (as NSQ
        does): it owns its epoch in etcd, so no peer adopts them."""
        for task in self._tasks:
            task.cancel()
        self._flush()
        if self.membership is not None and self.epoch:
            try:
                owner = await self.membership.claim(self.node, self.epoch)
                if owner != self.node:
                    self.log.warning("REPLICATION: epoch %d was taken over by %s", self.epoch, owner)
                await self.membership.end_lease(self.epoch)
            except EtcdUnavailable as error:
                self.log.error("REPLICATION: etcd unavailable at stop (%s): a survivor may take this "
                               "node's messages over, and they are dropped here at the next start", error)
        for link in list(self.links.values()):
            link.close()
        if self.logs is not None:
            self.logs.close()
        await self.etcd.close()

    # --- the etcd loops -----------------------------------------------------------------------

    async def _renew(self) -> None:
        interval = self.lease_ttl / 3
        while True:
            await asyncio.sleep(interval)
            try:
                if not self.epoch:
                    await self._join()
                elif not await self.membership.renew():
                    await self._fenced()
                self.etcd_ok = True
            except EtcdUnavailable as error:
                self.etcd_ok = False
                self._etcd_trouble.error(f"REPLICATION: etcd unavailable ({error}): still accepting publishes, "
                                         "with the peers already connected; no takeover can happen until it "
                                         "answers")
            except StartupError as error:
                self._etcd_trouble.error(f"REPLICATION: {error}")

    async def _fenced(self) -> None:
        """This node's lease ended while it lived (frozen, or cut off):
        whoever owns the epoch now delivers what it accepted."""
        epoch = self.epoch
        owner = await self.membership.claim(self.node, epoch)
        if owner != self.node:
            dropped = let_go(self.nsqd)
            self.log.error("REPLICATION: lease of epoch %d ended and %s took it over: dropped %d messages "
                           "delivered there now", epoch, owner, dropped)
        else:
            self.log.error("REPLICATION: lease of epoch %d ended; nobody took it over: keeping its messages",
                           epoch)
        self.membership.epoch = 0
        await self._join()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            started = time.monotonic()
            try:
                members = await self.membership.members()
            except EtcdUnavailable:
                continue  # _renew says so
            self._update_links(members)
            live = {(node, info["epoch"]) for node, info in members.items()}
            for key, shadow in list(self.shadows.items()):
                if key in live or shadow.created > started or key[0] == self.node:
                    continue
                try:
                    await self._take_over(shadow)
                except EtcdUnavailable:
                    break

    async def _take_over(self, shadow: Shadow) -> None:
        key = (shadow.origin, shadow.epoch)
        if not len(shadow):  # told of channels and outcomes only: another peer held the copies
            self._forget(key)
            return
        owner = await self.membership.claim(*key)
        self._forget(key)
        if owner == shadow.origin:
            self.log.info("REPLICATION: %s epoch %d was kept by its own node: dropping its %d copies here",
                          shadow.origin, shadow.epoch, len(shadow))
        elif owner != self.node:
            self._hand_over(shadow, owner)
        else:
            began = time.monotonic()
            first = key not in self._adopted
            done = self._adopted.setdefault(key, set())
            while len(self._adopted) > ADOPTIONS_KEPT:
                del self._adopted[next(iter(self._adopted))]
            count = adopt(self.nsqd, shadow, self._replicate_adopted, done)
            if count:
                self.takeovers += first
                self.adopted += count
                self.log.warning("REPLICATION: took over %s epoch %d: %d messages delivered from here (%.1f ms)",
                                 shadow.origin, shadow.epoch, count, (time.monotonic() - began) * 1000)

    def _forget(self, key: tuple[str, int]) -> None:
        self.shadows.pop(key, None)
        if self.logs is not None:
            self.logs.remove(*key)

    def _hand_over(self, shadow: Shadow, owner: str) -> None:
        """Another survivor took the epoch over: it gets the copies held
        here too, and adopts those it lacks (an origin's successors change
        with the members, so two peers may hold different parts of it)."""
        link = self.links.get(owner)
        if link is None or not link.ready:
            self.log.error("REPLICATION: %s epoch %d was taken over by %s, which is not connected: %d copies "
                           "held here are dropped", shadow.origin, shadow.epoch, owner, len(shadow))
            return
        link.send(shadow.origin, shadow.epoch, None, shadow.as_payload())
        self.log.info("REPLICATION: %s epoch %d was taken over by %s: handed it the %d copies held here",
                      shadow.origin, shadow.epoch, owner, len(shadow))

    # --- links to the peers --------------------------------------------------------------------

    def _update_links(self, members: dict[str, dict]) -> None:
        self.members = members
        for node in list(self.links):
            if node not in members:
                self.links.pop(node).close()
        self._ring_changed()
        loop = asyncio.get_running_loop()
        for node in members:
            if node not in self.links:
                host, _, port = node.rpartition(":")
                link = self.links[node] = PeerLink(node, host, int(port), self._link_lost, self._link_ready,
                                                   self.log)
                loop.create_task(self._connect(link))

    async def _connect(self, link: PeerLink) -> None:
        try:
            await asyncio.get_running_loop().create_connection(lambda: link, link.host, link.port)
        except OSError as error:
            self._peer_trouble.error(f"REPLICATION: cannot connect to peer {link.node}: {error}")
            if self.links.get(link.node) is link:
                del self.links[link.node]  # the next look at the members tries again

    def _link_ready(self, link: PeerLink) -> None:
        """A new link first learns every channel, so that the copies it
        gets go to the right ones."""
        for topic in self.nsqd.topics.values():
            if topic.paused:
                link.writer.add(event_record(PAUSED, topic.name, ""))
            for name, channel in topic.channels.items():
                link.writer.add(event_record(CHANNEL, topic.name, name))
                if channel.paused:
                    link.writer.add(event_record(PAUSED, topic.name, name))
        self._ring_changed()
        self._schedule_flush()
        self.log.info("REPLICATION: connected to peer %s", link.node)

    def _link_lost(self, link: PeerLink, unacked: list[Acks]) -> None:
        if self.links.get(link.node) is link:
            del self.links[link.node]
        self._ring_changed()
        if not link.closing:
            self._peer_trouble.error(f"REPLICATION: lost peer {link.node}")
        for acks in unacked:
            if acks.future.done():
                continue
            spare = next((other for other in self._ring_links(len(self.links))
                          if other.node not in acks.holders), None)
            if spare is None:
                self.under_replicated += acks.messages
                acks.short()
            else:
                acks.holders.add(spare.node)
                spare.send(self.node, self.epoch, acks, b"".join(acks.published))

    def _ring_changed(self) -> None:
        """Links came or went: the successors may be others now. A new one
        gets a copy of everything this node still owes (snapshot.py), so no
        message keeps fewer copies than asked for longer than that takes."""
        self._ring = self._ring_links(self.factor - 1)
        new = [link for link in self._ring if link.node not in self._ring_nodes]
        self._ring_nodes = {link.node for link in self._ring}
        if not new or not self.epoch:
            return
        records = owed_records(self.nsqd)
        for link in new:
            for record, count in records:
                link.writer.add(record, count)
        if records:
            self._schedule_flush()
            self.log.info("REPLICATION: copied %d held messages to %s", sum(count for _, count in records),
                          ", ".join(link.node for link in new))

    def _ring_links(self, count: int) -> list[PeerLink]:
        """Up to ``count`` connected peers that follow this node in the
        order of node names: each node's copies go to its successors."""
        ready = sorted((node for node, link in self.links.items() if link.ready))
        after = [node for node in ready if node > self.node] + [node for node in ready if node < self.node]
        return [self.links[node] for node in after[:count]]

    # --- as an origin --------------------------------------------------------------------------

    def published(self, topic: str, messages, defer_ms: int = 0) -> None:
        """``messages`` (one PUB's or DPUB's, with one timestamp) were queued on ``topic``."""
        self._published(published_record(topic, messages[0].timestamp, defer_ms, [m.id for m in messages],
                                          encode_mpub_body([m.body for m in messages])), len(messages))

    def published_mpub(self, topic: str, timestamp: int, ids: list[bytes], body: bytes) -> None:
        """An MPUB's messages were queued on ``topic``: its body goes on as it came."""
        self._published(published_record(topic, timestamp, 0, ids, body), len(ids))

    def _replicate_adopted(self, topic: str, message, channels: tuple[str, ...]) -> None:
        self._published(published_record(topic, message.timestamp, 0, [message.id],
                                         encode_mpub_body([message.body]), channels), 1)

    def _published(self, record: bytes, count: int) -> None:
        ring = self._ring
        acks = self._acks
        if acks is None:
            acks = self._acks = Acks(self.nsqd.loop, 0)
            self._schedule_flush()
        acks.published.append(record)
        acks.messages += count
        for link in ring:
            link.writer.add(record, count)
            acks.holders.add(link.node)

    def done(self, topic: str, channel: str, message_id: bytes) -> None:
        """``channel`` is through with the message (finished, dead-lettered, expired)."""
        record = done_record(topic, channel, [message_id])
        for link in self.links.values():
            link.writer.add(record)
        self._schedule_flush()

    def changed(self, topic: str, channel: str | None, kind: int) -> None:
        """A channel (``None``: the topic) was created, deleted, emptied,
        paused or unpaused (protocol/replication.py's kinds)."""
        if kind == CHANNEL and channel is None:
            return  # a topic on its own owes nothing to anyone
        record = event_record(kind, topic, channel or "")
        for link in self.links.values():
            link.writer.add(record)
        self._schedule_flush()

    def acks(self) -> "asyncio.Future | None":
        """What the publishes of this turn wait for; None when they wait for nothing."""
        acks = self._acks
        return None if acks is None else acks.future

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.nsqd.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        acks, self._acks = self._acks, None
        if acks is not None:
            acks.needed = len(acks.holders)
            missing = self.factor - 1 - acks.needed
            if missing > 0:
                self.under_replicated += missing * acks.messages
                self._short_trouble.error(f"REPLICATION: {acks.needed} of {self.factor - 1} peers connected: "
                                          "messages are acknowledged with fewer copies than "
                                          f"--replication-factor {self.factor}")
            if not acks.needed:
                acks.future.set_result(None)
        for link in self.links.values():
            if link.writer:
                link.send(self.node, self.epoch, acks if acks is not None and link.node in acks.holders else None)

    # --- as a peer -------------------------------------------------------------------------------

    def receive(self, origin: str, epoch: int, payload: bytes) -> "asyncio.Future | None":
        """A ``REPL`` batch from ``origin``; raises ``ReplicationError``.
        -> with --replication-ack=disk, what resolves once it is fsynced."""
        key = (origin, epoch)
        shadow = self.shadows.get(key)
        if shadow is None:
            if origin == self.node:
                raise ReplicationError("a batch from this node itself")
            shadow = self.shadows[key] = Shadow(origin, epoch)
        shadow.apply(read_records(payload))
        logs = self.logs
        if logs is None:
            return None
        if logs.size(origin, epoch) + len(payload) <= logs.rewrite_threshold(origin, epoch):
            return logs.append(origin, epoch, payload)
        logs.rewrite(origin, epoch, shadow.as_payload())  # this batch included, fsynced
        written = asyncio.get_running_loop().create_future()
        written.set_result(None)
        return written

    # --- what operators see -----------------------------------------------------------------------

    def stats(self) -> dict:
        peers = []
        ring = {link.node for link in self._ring_links(self.factor - 1)}
        for node, link in sorted(self.links.items()):
            lag_messages, lag_ms = link.lag()
            peers.append({"node": node, "connected": link.ready, "replica": node in ring,
                          "sent_messages": link.messages, "lag_messages": lag_messages,
                          "lag_ms": round(lag_ms, 3)})
        return {
            "node": self.node,
            "epoch": self.epoch,
            "replication_factor": self.factor,
            "etcd_ok": self.etcd_ok,
            "peers": peers,
            "shadows": [{"origin": origin, "epoch": epoch, "messages": len(shadow)}
                        for (origin, epoch), shadow in sorted(self.shadows.items())],
            "takeovers": self.takeovers,
            "adopted_messages": self.adopted,
            "under_replicated_messages": self.under_replicated,
        }
