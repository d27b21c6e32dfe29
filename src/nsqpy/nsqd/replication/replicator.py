"""The replicated nsqd's side of everything: what it sends its peers as an
origin, what it keeps for them as a peer, and the etcd loops (renewing
its lease, watching the members) that decide takeovers.

nsqd calls in at a handful of points: ``published`` (a topic queued
messages), ``done`` (a channel is through with a message), ``changed``
(a channel appeared, went, or was emptied), ``acks()`` (what a publish
waits for before its OK), ``receive`` (a peer's ``REPL`` batch).
"""

import asyncio
import hashlib
import json
import logging
import os
import re
import time

from ...atomicfile import write_atomically
from ...errors import StartupError
from ...ratelog import RateLimitedLog
from ...protocol.commands import encode_mpub_body
from ...protocol.replication import (CHANNEL, DELETED, EMPTIED, PAUSED, RESET, NotAMember, ReplicationError,
                                     done_record, event_record, keys_record, proves_membership, published_record,
                                     read_records)
from ..tls import peer_context
from .departure_log import DepartureLog
from .departures import Departures
from .etcd import Etcd, EtcdUnavailable
from .links import Acks, PeerLink, ReplicationShort
from .membership import AddressTaken, Membership, NodeIdTaken, Owner
from . import shadowspill
from .shadow import SLICE, Shadow
from .shadowlog import ShadowLogs
from .snapshot import Snapshot
from .takeover import adopt, let_go

EPOCH_FILE = "nsqd.replication.json"
NODE_NAME = re.compile(r"[A-Za-z0-9.\-]{1,253}:[0-9]{1,5}")  # a broadcast host:port, as nodes name themselves
WATCH_INTERVAL = 0.5  # how often the members are read: a takeover starts this long after a lease ends
HAND_OVER_WAIT = 60.0  # how long a hand-over waits for its new owner to confirm it holds the copies
LINKS_WAIT = 2.0  # how long a starting node waits for its links to its successors before it listens
SETTLE_WAIT = 3.0  # after a crash, how long a restarted node waits for a survivor to claim what it had
ADOPTIONS_KEPT = 64  # epochs taken over whose ids are kept, so a late hand-over adopts only what is new
COPY_AHEAD = 4 * SLICE  # a new successor's copy waits while it has this many messages sent and not answered


class _Copy:
    """A snapshot on its way to new successors, and the outcomes told
    meanwhile: told again once it is whole, for the messages it carried
    that a channel finished before the peer held them."""

    __slots__ = ("snapshot", "links", "finished")

    def __init__(self, snapshot: Snapshot, links: list[PeerLink]):
        self.snapshot = snapshot
        self.links = links
        self.finished: list[bytes] = []


class Replicator:
    def __init__(self, nsqd):
        options = nsqd.options
        self.nsqd = nsqd
        self.log: logging.Logger = nsqd.log
        self.factor = options.replication_factor
        self.min_copies = options.replication_min_copies
        try:
            self.tls = peer_context(options)  # peers that require TLS are reached over it
        except ValueError as error:
            raise StartupError(str(error)) from None
        self.secret: bytes | None = None  # the cluster's, that links prove membership with (RAUTH)
        if options.replication_secret_file:
            self.secret = signing_key(_read_secret(options.replication_secret_file))
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
        self._adopted: dict[tuple[str, int], set[tuple[str, bytes]]] = {}  # (topic, id) adopted per epoch taken over
        self.under_replicated = 0
        # origins that died with every peer holding their copies (departures.py)
        self._departures = Departures(self.factor - 1, grace=2 * self.lease_ttl + WATCH_INTERVAL)
        self.lost: dict[str, int] = {}  # origin -> epochs lost with their replicas
        self.departed = DepartureLog()  # members that left while this node watched, for operators
        self.etcd_ok = False
        # the epoch a previous run left in the data dir is settled (kept, or let go to its new owner):
        # until then what the data dir holds may be a survivor's to deliver
        self._settled = False
        self._gone: dict[tuple[str, int], float] = {}  # epochs of shadows held, when first seen out of the members
        self._held_back = False  # a channel had messages to hand out while fenced
        self.logs: ShadowLogs | None = None  # --replication-ack=disk: the shadows' logs
        self._spill_directory = os.path.join(nsqd.data_path, "replication", "spill")  # bodies past memory
        self._acks: Acks | None = None
        self._pending_acks: dict[str, list[Acks]] = {}  # per link: publishes it answers for in place of a lost one
        self._ring: list[PeerLink] = []  # the peers that take this node's copies
        self._ring_nodes: set[str] = set()  # theirs, as last copied to under this epoch
        self._copies: list[_Copy] = []  # snapshots being sent to new successors
        self._flush_scheduled = False
        self._fencing = False  # the lease ended while this node lived: it hands over and joins again
        self._busy: set[tuple[str, int]] = set()  # epochs whose shadow is being adopted or handed over
        self._tasks: list[asyncio.Task] = []
        self._background: set[asyncio.Task] = set()  # hand-overs waiting for their owner
        # one line now and then for each recurring trouble
        self._etcd_trouble = RateLimitedLog(self.log)
        self._peer_trouble = RateLimitedLog(self.log)
        self._short_trouble = RateLimitedLog(self.log)

    @property
    def epoch(self) -> int:
        return self.membership.epoch if self.membership is not None else 0

    @property
    def fenced(self) -> bool:
        """Whether this node may no longer own what it holds: its lease
        may have ended as etcd counts it (membership.py's deadline), or
        what a previous run left is not settled yet. A fenced node
        acknowledges no publish and delivers nothing (its channels ask)
        until it knows again."""
        if not self._settled:
            return True
        return bool(self.epoch) and self.membership.lease_left() <= 0

    def check_answer(self) -> None:
        """Raises ``ReplicationShort`` when a publish may not be answered
        OK now: checked as its OK is written, so that a node past its
        lease's deadline (cut off from etcd, or frozen and resumed)
        acknowledges nothing after it, whatever it had queued before."""
        if self.fenced:
            raise ReplicationShort(self._fenced_reason())

    def _fenced_reason(self) -> str:
        if self._fencing:
            return "replication: this node's lease ended, it is joining again"
        if not self._settled:
            return "replication: what this node held before it started is not settled yet (etcd not reached)"
        return "replication: this node's lease could not be renewed in time (etcd not reached)"

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, node: str) -> None:
        """Settle what a previous run of this node left (taken over, or its
        own to keep), join the members, and start watching them."""
        self.node = node
        self.membership = Membership(self.etcd, self.prefix, node, self.lease_ttl)
        logs = ShadowLogs(self.nsqd.data_path, asyncio.get_running_loop())
        shadowspill.clear(self._spill_directory)
        read_back = self._replay_logs(logs)
        if self.nsqd.options.replication_ack == "disk":
            self.logs = logs
        self._settled = not os.path.exists(os.path.join(self.nsqd.data_path, EPOCH_FILE))
        try:
            await self._settle_previous()
            await self._join()
            await self._links_up(LINKS_WAIT)
        except EtcdUnavailable as error:
            answered = ("accepting publishes with fewer copies" if self.refusal() is None
                        else "refusing publishes with E_PUB_FAILED")
            self.log.error("REPLICATION: etcd unavailable (%s): %s until it answers", error, answered)
        if self.logs is None:  # held in memory from now on: a later crash loses them, as memory does
            for origin, epoch in read_back:
                logs.remove(origin, epoch)
        self._tasks = [asyncio.get_running_loop().create_task(self._watch()),
                       asyncio.get_running_loop().create_task(self._renew())]

    async def _links_up(self, within: float) -> None:
        """A node that starts listening has its successors linked already
        (when they are up), so its first publishes are not refused."""
        deadline = time.monotonic() + within
        while len(self._ring) < min(self.factor - 1, len(self.members)) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    def _replay_logs(self, logs: ShadowLogs) -> list[tuple[str, int]]:
        """The copies this peer held before it stopped (acknowledged from
        disk with --replication-ack=disk, or kept by a clean stop): each
        shadow as its batches built it, taken over at the first look at the
        members if its origin is gone. -> the shadows read back."""
        read_back = []
        for origin, epoch, payloads in logs.load():
            shadow = self.shadows[(origin, epoch)] = self._new_shadow(origin, epoch)
            shadow.created = 0.0
            try:
                for payload in payloads:
                    shadow.apply(read_records(payload))
            except ReplicationError as error:
                self.log.error("REPLICATION: log of %s epoch %d: %s; kept what came before", origin, epoch, error)
            self.log.info("REPLICATION: %d copies of %s epoch %d read back from disk", len(shadow), origin, epoch)
            read_back.append((origin, epoch))
        return read_back

    async def _join(self) -> None:
        nsqd = self.nsqd
        info = {"tcp": self.node, "http": f"{nsqd.options.broadcast_address}:{nsqd.http_port}",
                "node_id": nsqd.options.node_id}
        if self.secret is None:  # --replication-secret-in-etcd: the operator chose it
            self.secret = signing_key((await self.membership.cluster_secret()).encode())
        try:
            epoch = await self.membership.join(info)
        except AddressTaken as taken:
            raise StartupError(f"replicated nsqd {self.node} is a member already ({taken}): each nsqd needs an "
                               "address of its own (--broadcast-address, --tcp-address)") from None
        except NodeIdTaken as taken:
            raise _node_id_taken(nsqd.options.node_id, str(taken)) from None
        members = await self.membership.members()
        write_atomically(os.path.join(nsqd.data_path, EPOCH_FILE),
                         json.dumps({"node": self.node, "epoch": epoch}).encode())
        self.etcd_ok = True
        self.log.info("REPLICATION: joined as %s, epoch %d, replication factor %d", self.node, epoch, self.factor)
        self._ring_nodes = set()  # copies made under an earlier epoch are not this one's
        self._update_links(members)

    async def _settle_previous(self) -> None:
        """The data dir holds what this node's last epoch accepted. If a
        survivor took that epoch over, it delivers it: drop ours. If nobody
        did (yet), wait for the old lease to end (a crashed node renews it
        no more), then a moment for a survivor holding a copy to claim it,
        and keep ours if none does. A lease that is still renewed is held
        by a live nsqd with this data dir (this one is a copy of it: a
        cloned VM, a volume snapshot): refused, and nothing changed."""
        try:
            with open(os.path.join(self.nsqd.data_path, EPOCH_FILE)) as file:
                previous = json.load(file)
            node, epoch = previous["node"], int(previous["epoch"])
        except (OSError, ValueError, KeyError, TypeError):
            self._settled = True
            return
        # a node is its data dir, not its address: one that comes back under another (a new
        # port, a new pod IP) settles the epoch it left as it would have under the old one
        await self._refuse_a_live_identity(node, epoch)
        owner = await self.membership.owner(node, epoch)
        if owner is None:
            if await self.membership.renewed_by_another(epoch):
                raise self._copy_of_live(f"epoch {epoch} of {node}, which it names, is still renewed")
            deadline = time.monotonic() + SETTLE_WAIT + self.membership.margin
            while owner is None and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                owner = await self.membership.owner(node, epoch)
            if owner is None:  # kept by the node it was: its peers see their origin kept it, and drop their copies
                owner = await self.membership.claim(node, epoch, as_node=node)
        if owner.node not in (node, self.node) and not await self._owner_alive(owner):
            # its owner died before this node came back: what the data dir holds is delivered from here
            owner = await self.membership.claim_from(node, epoch, owner, as_node=node)
        if owner.node not in (node, self.node):  # kept by this node, under its old address or its new one
            dropped = let_go(self.nsqd)
            self.log.warning("REPLICATION: epoch %d of %s was taken over by %s: dropped the %d messages "
                             "it had left here", epoch, node, owner.node, dropped)
        self._settled = True

    async def _refuse_a_live_identity(self, node: str, epoch: int) -> None:
        """Raises ``StartupError`` before anything is claimed when a live
        member has the identity this start would settle: the node its data
        dir names, under a later epoch (a copy of an older snapshot of a
        live node's data dir), or this node's --node-id under another name."""
        registered = await self.membership.member(node)
        if registered is not None and registered.get("epoch") != epoch:
            raise self._copy_of_live(f"{node}, which it names, is a member under epoch {registered.get('epoch')}")
        node_id = self.nsqd.options.node_id
        holder = await self.membership.node_id_holder(node_id)
        if holder not in (None, node):
            raise _node_id_taken(node_id, holder)

    def _copy_of_live(self, why: str) -> StartupError:
        return StartupError(f"the data dir {self.nsqd.data_path} is a live nsqd's: {why}; a copy of a running "
                            "nsqd's data dir (a cloned VM, a volume snapshot) cannot join: give it an empty "
                            "--data-path")

    async def stop(self) -> None:
        """A clean stop keeps this node's messages in its data dir (as NSQ
        does): it owns its epoch in etcd, so no peer adopts them."""
        running = [*self._tasks, *self._background]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)  # what they held is back in self.shadows
        self._flush()
        if self.membership is not None and self.epoch:
            try:
                owner = await self.membership.claim(self.node, self.epoch)
                if owner.node != self.node:
                    self.log.warning("REPLICATION: epoch %d was taken over by %s", self.epoch, owner.node)
                await self.membership.end_lease(self.epoch)
            except EtcdUnavailable as error:
                self.log.error("REPLICATION: etcd unavailable at stop (%s): a survivor may take this "
                               "node's messages over, and they are dropped here at the next start", error)
            self.membership.epoch = 0
        for link in list(self.links.values()):
            link.close()
        self._keep_shadows()
        for shadow in self.shadows.values():
            shadow.close()
        if self.logs is not None:
            self.logs.close()
        await self.etcd.close()

    def _new_shadow(self, origin: str, epoch: int) -> Shadow:
        """Bodies past --mem-queue-size messages per topic go to disk, as the node's own queues' do."""
        return Shadow(origin, epoch, self._spill_directory, self.nsqd.options.mem_queue_size)

    def _keep_shadows(self) -> None:
        """The copies held for others are acknowledged messages too: a
        clean stop keeps them in the data dir, as it keeps its own (with
        --replication-ack=disk they are there already)."""
        if self.logs is not None or not self.shadows:
            return
        logs = ShadowLogs(self.nsqd.data_path, self.nsqd.loop)
        for (origin, epoch), shadow in self.shadows.items():
            logs.rewrite(origin, epoch, shadow.as_payload())
            self.log.info("REPLICATION: kept %d copies of %s epoch %d in the data dir", len(shadow), origin, epoch)

    # --- the etcd loops -----------------------------------------------------------------------

    async def _renew(self) -> None:
        # every sixth of a lease, five tries before the deadline: a node whose event loop or etcd
        # is slow for a moment (a large takeover on a busy machine) still renews in time, and
        # fences itself only when etcd stays out of reach
        interval = self.lease_ttl / 6
        while True:
            await asyncio.sleep(interval)
            fenced = self.fenced
            try:
                if not self.epoch:  # etcd was not there at start, or fencing could not join again
                    if not self._settled:
                        await self._settle_previous()
                    await self._join()
                elif not await self.membership.renew():
                    await self._fenced()
                if not self.etcd_ok:
                    self.log.info("REPLICATION: etcd answers again")
                self.etcd_ok = True
                if fenced and not self.fenced:
                    self.log.info("REPLICATION: lease of epoch %d renewed: acknowledging and delivering again",
                                  self.epoch)
            except EtcdUnavailable as error:
                self.etcd_ok = False
                if not self.epoch:
                    answered = "accepting publishes" if self.refusal() is None else "refusing publishes"
                else:
                    left = self.membership.lease_left()
                    answered = (f"acknowledging and delivering for {left:.1f} s more, until its lease may end"
                                if left > 0 else "refusing publishes and delivering nothing, as its lease may "
                                "have ended and a survivor may take its messages over")
                self._etcd_trouble.error(f"REPLICATION: etcd unavailable ({error}): {answered}")
            except StartupError as error:
                self._etcd_trouble.error(f"REPLICATION: {error}: refusing publishes")
            except Exception:  # noqa: BLE001 - the loop must outlive any one failure
                self.log.exception("REPLICATION: renewing the lease failed")
            finally:
                self._resume_deliveries()

    def held_back(self) -> None:
        """A channel had something to hand out while this node was fenced."""
        self._held_back = True

    def _resume_deliveries(self) -> None:
        """Channels held back while fenced hand out what they hold again."""
        if self._held_back and not self.fenced:
            self._held_back = False
            for channel in self.nsqd.channels():
                channel.schedule_dispatch()

    async def _fenced(self) -> None:
        """This node's lease ended while it lived (frozen, or cut off):
        whoever owns the epoch now delivers what it accepted."""
        epoch = self.epoch
        self._fencing = True
        self.membership.deadline = 0.0
        try:
            await self._hand_over_own(epoch)
        finally:
            self._fencing = False
        self.membership.epoch = 0
        await self._join()

    async def _hand_over_own(self, epoch: int) -> None:
        owner = await self.membership.claim(self.node, epoch)
        if owner.node != self.node and not await self._owner_alive(owner):
            # its owner died before this node came back: nobody else delivers what is held here
            owner = await self.membership.claim_from(self.node, epoch, owner)
        # a node that was frozen finds its links closed for silence: the owner is dialled again
        link = await self._ready_link(owner.node, self.lease_ttl) if owner.node != self.node else None
        if owner.node == self.node:
            self.log.error("REPLICATION: lease of epoch %d ended; nobody took it over: keeping its messages",
                           epoch)
        elif link is None:
            self.log.error("REPLICATION: lease of epoch %d ended and %s took it over, which cannot be reached: "
                           "keeping the messages held here (both may deliver some)", epoch, owner.node)
        elif not await self._confirmed(link, self.node, epoch, Snapshot.of(self.nsqd).payloads()):
            self.log.error("REPLICATION: lease of epoch %d ended and %s took it over, but did not confirm what "
                           "was handed to it: keeping the messages held here (both may deliver some)", epoch,
                           owner.node)
        else:
            # what this node accepted after the survivor's copy was made went there too; the
            # survivor adopts what it lacks, and this node lets all of it go
            dropped = let_go(self.nsqd)
            self.log.error("REPLICATION: lease of epoch %d ended and %s took it over: handed it and dropped "
                           "the %d messages held here once it confirmed them", epoch, owner.node, dropped)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            try:
                await self._look_at_members()
            except EtcdUnavailable:
                pass  # _renew says so
            except Exception:  # noqa: BLE001 - the loop must outlive any one failure
                self.log.exception("REPLICATION: looking at the members failed")

    async def _look_at_members(self) -> None:
        """Links to every member; a takeover of each shadow whose epoch
        left the members (one that came before this look began)."""
        started = time.monotonic()
        self._drop_silent_links()
        members = await self.membership.members()
        seen = time.monotonic()  # a lease missing from the answer may have ended as late as this
        self._update_links(members)
        live = {(node, info["epoch"]) for node, info in members.items()}
        # an epoch is claimed a clock-drift margin after its lease was seen gone (membership.py); one
        # this node owns already (copies handed to it) is adopted at once
        self._gone = {key: self._gone.get(key, seen) for key in self.shadows if key not in live}
        for key, shadow in list(self.shadows.items()):
            if not self.epoch or self.fenced:
                break  # what it would adopt, it might have to let go of
            if (key in self._gone and (key in self._adopted or seen - self._gone[key] >= self.membership.margin)
                    and shadow.created <= started and key[0] != self.node and key not in self._busy
                    and self.shadows.get(key) is shadow):
                await self._take_over(shadow)
        if self.epoch:
            for node, epoch in self._departures.look({**dict(live), self.node: self.epoch}):
                self.departed.left(node, epoch)
        for node, epoch, replicas in self._departures.due():
            if await self.membership.owner(node, epoch) is None:
                self.lost[node] = self.lost.get(node, 0) + 1
                self.log.error("REPLICATION: %s epoch %d left the cluster together with %s, every peer that "
                               "held its copies, and nobody took it over: what it acknowledged is lost unless "
                               "it comes back with its data dir", node, epoch, " and ".join(replicas))
        await self.departed.find_owners(self.membership.owner)

    async def _take_over(self, shadow: Shadow) -> None:
        key = (shadow.origin, shadow.epoch)
        if not len(shadow) and not shadow.keys_held():
            # told of channels and outcomes only: another peer held the copies
            self._forget(shadow)
            return
        owner = await self.membership.claim(*key)
        if owner.node != shadow.origin and not await self._owner_alive(owner):
            gone = owner
            owner = await self.membership.claim_from(*key, gone)
            if owner.node == self.node:
                self.log.warning("REPLICATION: %s epoch %d was taken over by %s, which left the cluster before "
                                 "it took these copies: taking it over from here", shadow.origin, shadow.epoch,
                                 gone.node)
        if self.shadows.get(key) is not shadow or self.fenced:
            return  # set aside or merged meanwhile, or fenced: the next look sees it as it is then
        if owner.node == shadow.origin:
            self.log.info("REPLICATION: %s epoch %d was kept by its own node: dropping its %d copies here",
                          shadow.origin, shadow.epoch, len(shadow))
            self._forget(shadow)
        elif owner.node != self.node:
            self._in_background(self._hand_over(shadow, owner.node))
        else:
            await self._adopt(shadow)

    async def _owner_alive(self, owner: Owner) -> bool:
        """Whether ``owner`` can still take copies of what it claimed: it
        is a member, under the epoch it claimed with or a later one (a
        node that was fenced or restarted since delivers what it adopted,
        or handed it on, and adopts more under its new epoch)."""
        if owner.node == self.node:
            return bool(self.epoch) and not self.fenced
        return owner.node in await self.membership.members()

    async def _adopt(self, shadow: Shadow) -> None:
        key = (shadow.origin, shadow.epoch)
        began = time.monotonic()
        first = key not in self._adopted
        done = self._adopted.setdefault(key, set())
        while len(self._adopted) > ADOPTIONS_KEPT:
            del self._adopted[next(iter(self._adopted))]
        self._set_aside(shadow)
        try:
            count = await adopt(self.nsqd, shadow, lambda topic, messages, channels: self.published(
                topic, messages, 0, channels), done)
        except BaseException:  # stopped meanwhile: what is not adopted yet is kept as a shadow
            shadow.forget_ids(done)
            self._put_back(shadow)
            raise
        self._forget(shadow)
        if count:
            self.takeovers += first
            self.adopted += count
            self.log.warning("REPLICATION: took over %s epoch %d: %d messages delivered from here (%.1f ms)",
                             shadow.origin, shadow.epoch, count, (time.monotonic() - began) * 1000)

    def _set_aside(self, shadow: Shadow) -> None:
        """``shadow`` is worked on across awaits (adopted, handed over):
        out of ``shadows``, so that batches for its epoch that come
        meanwhile (a hand-over from another peer) build a shadow of their
        own, adopted at a later look for what this one lacked."""
        key = (shadow.origin, shadow.epoch)
        if self.shadows.get(key) is shadow:
            del self.shadows[key]
        self._busy.add(key)

    def _put_back(self, shadow: Shadow) -> None:
        """``shadow`` is held here again, merged with what came for its epoch meanwhile."""
        key = (shadow.origin, shadow.epoch)
        self._busy.discard(key)
        newer = self.shadows.get(key)
        if newer is not None:
            merged = self._new_shadow(shadow.origin, shadow.epoch)
            merged.created = min(shadow.created, newer.created)
            for payload in (*shadow.payload_slices(), *newer.payload_slices()):
                merged.apply(read_records(payload))
            shadow.close()
            newer.close()
            shadow = merged
            if self.logs is not None:
                self.logs.rewrite(*key, shadow.as_payload())
        self.shadows[key] = shadow

    def _forget(self, shadow: Shadow) -> None:
        """``shadow`` is done with (adopted, handed over, kept by its
        origin). A newer shadow of its epoch, built while it was set
        aside, stays, and its log holds only it."""
        key = (shadow.origin, shadow.epoch)
        self._busy.discard(key)
        if self.shadows.get(key) is shadow:
            del self.shadows[key]
        shadow.close()
        if self.logs is not None:
            newer = self.shadows.get(key)
            if newer is None:
                self.logs.remove(*key)
            else:
                self.logs.rewrite(*key, newer.as_payload())

    def _in_background(self, work) -> None:
        """Work that may wait long (a hand-over waits for its owner), so
        that the look at the members goes on meanwhile; stop() ends it."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _hand_over(self, shadow: Shadow, owner: str) -> None:
        """Another survivor took the epoch over: it gets the copies held
        here too, and adopts those it lacks (an origin's successors change
        with the members, so two peers may hold different parts of it).
        They are dropped here once the owner has said it holds them, and
        kept (handed over again at a later look) until then."""
        count = len(shadow)
        self._set_aside(shadow)
        try:
            link = await self._ready_link(owner, self.lease_ttl)
            confirmed = link is not None and await self._confirmed(link, shadow.origin, shadow.epoch,
                                                                   shadow.payload_slices())
        except BaseException:
            self._put_back(shadow)
            raise
        if link is None:
            self._put_back(shadow)
            self._peer_trouble.error(f"REPLICATION: {shadow.origin} epoch {shadow.epoch} was taken over by "
                                     f"{owner}, which cannot be reached: keeping the {count} copies held here, "
                                     "to hand over at a later look (or take over, if it dies first)")
            return
        if confirmed:
            self._forget(shadow)
            self.log.info("REPLICATION: %s epoch %d was taken over by %s: handed it the %d copies held here",
                          shadow.origin, shadow.epoch, owner, count)
        else:
            self._put_back(shadow)
            self.log.error("REPLICATION: %s epoch %d was taken over by %s, which did not confirm the %d copies "
                           "handed to it: keeping them, to hand over again", shadow.origin, shadow.epoch, owner,
                           count)

    async def _confirmed(self, link: PeerLink, origin: str, epoch: int, payloads) -> bool:
        """Each of ``payloads`` to ``link`` as a batch of ``origin``'s
        ``epoch``, one per event-loop turn; True once the peer has said OK
        to the last (the peer answers in order: to all of them)."""
        acks = Acks(self.nsqd.loop, 1, replaceable=False)
        acks.sent_to({link.node})
        sent = False
        payload = next(payloads, None)
        while payload is not None:
            following = next(payloads, None)
            self._flush()  # this node's own records go first, under its own epoch, never in these batches
            link.writer.add(payload)
            if not link.send(origin, epoch, [] if following is not None else [acks]):
                return False
            sent = True
            payload = following
            await asyncio.sleep(0)
        if not sent:  # nothing to hand over
            acks.acked()
        try:
            await asyncio.wait_for(asyncio.shield(acks.future), HAND_OVER_WAIT)
        except (ReplicationShort, asyncio.TimeoutError):
            return False
        return True

    # --- links to the peers --------------------------------------------------------------------

    def _drop_silent_links(self) -> None:
        """A peer that keeps its lease but has not answered a batch for a
        lease's time (a disk whose fsync hangs) no longer holds publishes
        up: its link goes, and the next successor answers in its place."""
        for link in list(self.links.values()):
            if link.lag()[1] > self.lease_ttl * 1000 or (
                    not link.ready and time.monotonic() - link.opened > self.lease_ttl):
                self._peer_trouble.error(f"REPLICATION: peer {link.node} has not answered for "
                                         f"{self.lease_ttl}s: closing its link")
                link.close()
                if not link.ready and self.links.get(link.node) is link:
                    del self.links[link.node]  # dialled again at the next look

    def _update_links(self, members: dict[str, dict]) -> None:
        self.members = members
        for node in list(self.links):
            if node not in members:
                self.links.pop(node).close()
        self._ring_changed()
        for node in members:
            if node not in self.links:
                self._dial(node)

    def _dial(self, node: str) -> None:
        host, _, port = node.rpartition(":")
        link = self.links[node] = PeerLink(node, host, int(port), self.node, self.secret, self.tls,
                                           self._link_lost, self._link_ready, self._peer_trouble)
        asyncio.get_running_loop().create_task(self._connect(link))

    async def _ready_link(self, node: str, within: float) -> PeerLink | None:
        """The link to ``node`` once it is up, dialled now if there is
        none; None if it is not up within ``within`` seconds."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            link = self.links.get(node)
            if link is None:
                self._dial(node)
            elif link.ready:
                return link
            await asyncio.sleep(0.05)
        return None

    async def _connect(self, link: PeerLink) -> None:
        try:
            await asyncio.get_running_loop().create_connection(lambda: link, link.host, link.port)
        except OSError as error:
            self._peer_trouble.error(f"REPLICATION: cannot connect to peer {link.node}: {error}")
            if self.links.get(link.node) is link:
                del self.links[link.node]  # the next look at the members tries again

    def _link_ready(self, link: PeerLink) -> None:
        """A new link first forgets what it held of this epoch (outcomes
        sent while it was away never reached it), then learns every
        channel, so that the copies it gets go to the right ones."""
        link.writer.add(event_record(RESET, "", ""))
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
            unacked = [*unacked, *self._pending_acks.pop(link.node, [])]  # given to it, not yet sent
        self._ring_changed()
        if not link.closing:
            self._peer_trouble.error(f"REPLICATION: lost peer {link.node}")
        for acks in unacked:
            self._replace(acks, link.node)

    def _replace(self, acks: Acks, lost: str) -> None:
        """``lost`` will not answer for ``acks``: a successor that does not
        hold them yet got a copy of everything on becoming one, and answers
        instead with its next batch; without one, a copy fewer."""
        if acks.future.done():
            return
        if not acks.replaceable:
            acks.short()
            return
        spare = next((link for link in self._ring if link.node not in acks.holders), None)
        if spare is None:
            self._count_short(acks)
            acks.short()
            return
        acks.holders.add(spare.node)
        self._pending_acks.setdefault(spare.node, []).append(acks)
        self._schedule_flush()

    def _count_short(self, acks: Acks) -> None:
        """``acks``' messages are held by fewer nsqd than
        --replication-factor: counted once, whatever their publishers hear."""
        if acks.counted_short:
            return
        acks.counted_short = True
        self.under_replicated += acks.messages
        answered = ("acknowledged with fewer copies" if self.min_copies < self.factor
                    else "refused with E_PUB_FAILED (--replication-min-copies)")
        self._short_trouble.error(f"REPLICATION: {len(self._ring)} of {self.factor - 1} peers connected: "
                                  f"publishes that cannot have {self.factor} copies are {answered}")

    def refusal(self) -> str | None:
        """Why a publish cannot have its copies now, or None: checked before
        it is queued, so that a refused publish leaves nothing behind."""
        if self.fenced:
            return self._fenced_reason()
        if self.min_copies == 1:
            return None
        if not self.epoch:
            why = "joining it" if self.etcd_ok else "etcd not reached"
            return f"replication: not a member of the cluster ({why})"
        have = len(self._ring) + 1
        if have < self.min_copies:
            return f"replication: {have} of {self.min_copies} copies can be made ({len(self._ring)} peers connected)"
        return None

    def _ring_changed(self) -> None:
        """Links came or went: the successors may be others now. A new one
        gets a copy of everything this node still owes (snapshot.py), so no
        message keeps fewer copies than asked for longer than that takes."""
        self._ring = self._ring_links(self.factor - 1)
        new = [link for link in self._ring if link.node not in self._ring_nodes]
        self._ring_nodes = {link.node for link in self._ring}
        if not new or not self.epoch:
            return
        copy = _Copy(Snapshot.of(self.nsqd), new)
        self._copies.append(copy)
        self._in_background(self._send_copy(copy))

    async def _send_copy(self, copy: _Copy) -> None:
        """``copy``'s slices, one per event-loop turn and no faster than
        its peers answer; publishes a lost peer left unanswered are
        answered once the copy is whole (_flush)."""
        began = time.monotonic()
        sent = 0
        try:
            for part in copy.snapshot.slices():
                copy.links = [link for link in copy.links if self.links.get(link.node) is link and link.ready]
                if not copy.links:
                    return  # each link that comes up again gets a copy of its own
                for link in copy.links:
                    for record, count in part:
                        link.writer.add(record, count)
                sent += sum(count for _, count in part)
                self._flush()
                await self._answered(copy.links)
            for link in copy.links:
                for record in copy.finished:
                    link.writer.add(record)
        finally:
            self._copies.remove(copy)
            copy.snapshot.close()
            self._schedule_flush()
        if sent:
            self.log.info("REPLICATION: copied %d held messages (one per channel holding each) to %s (%.1f s)",
                          sent, ", ".join(link.node for link in copy.links), time.monotonic() - began)

    async def _answered(self, links: list[PeerLink]) -> None:
        """Back after this turn, once no link in ``links`` that is up has
        more than COPY_AHEAD messages sent and not answered."""
        await asyncio.sleep(0)
        while any(link.ready and self.links.get(link.node) is link and link.lag()[0] > COPY_AHEAD
                  for link in links):
            await asyncio.sleep(0.005)

    def _ring_links(self, count: int) -> list[PeerLink]:
        """Up to ``count`` connected peers that follow this node in the
        order of node names: each node's copies go to its successors."""
        ready = sorted((node for node, link in self.links.items() if link.ready))
        after = [node for node in ready if node > self.node] + [node for node in ready if node < self.node]
        return [self.links[node] for node in after[:count]]

    # --- as an origin --------------------------------------------------------------------------

    def published(self, topic: str, messages, defer_ms: int, channels: tuple[str, ...]) -> None:
        """``messages`` (one PUB's or DPUB's, with one timestamp) were queued
        on ``topic``, for ``channels`` (none: they wait in the topic)."""
        self._published(published_record(topic, messages[0].timestamp, defer_ms, [m.id for m in messages],
                                          encode_mpub_body([m.body for m in messages]), channels), len(messages))

    def published_mpub(self, topic: str, timestamp: int, ids: list[bytes], body: bytes,
                       channels: tuple[str, ...]) -> None:
        """An MPUB's messages were queued on ``topic``: its body goes on as it came."""
        self._published(published_record(topic, timestamp, 0, ids, body, channels), len(ids))

    def _published(self, record: bytes, count: int) -> None:
        acks = self._acks
        if acks is None:
            acks = self._acks = Acks(self.nsqd.loop, self.min_copies - 1)
            self._schedule_flush()
        acks.messages += count
        if not self.epoch:
            return  # no epoch to copy under (etcd not reached yet): fewer copies
        for link in self._ring:
            link.writer.add(record, count)

    def keyed(self, topic: str, window: float, keys: list[tuple[int, bytes]]) -> None:
        """Keys of keyed publishes queued on ``topic`` now, after their
        messages' record: the successors keep them with the copies, so the
        survivor that takes this node over recognises a repeat."""
        if not self.epoch:
            return
        record = keys_record(topic, round(window * 1000), keys)
        for link in self._ring:
            link.writer.add(record)

    def done(self, topic: str, channel: str, message_id: bytes) -> None:
        """``channel`` is through with the message (finished, dead-lettered, expired)."""
        record = done_record(topic, channel, [message_id])
        for link in self.links.values():
            link.writer.add(record)
        for copy in self._copies:
            copy.finished.append(record)
        self._schedule_flush()

    def changed(self, topic: str, channel: str | None, kind: int) -> None:
        """A channel (``None``: the topic) was created, deleted, emptied,
        paused or unpaused (protocol/replication.py's kinds)."""
        if kind == CHANNEL and channel is None:
            return  # a topic on its own owes nothing to anyone
        if kind == DELETED or kind == EMPTIED:
            for copy in self._copies:
                copy.snapshot.forget(topic, channel, whole_topic=kind == DELETED and channel is None)
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
        """The turn's records go out, one batch per link. This turn's
        publishes wait for the successors as they are now: each got their
        messages as records, or in the copy of everything it got on
        becoming a successor (``_ring_changed``)."""
        self._flush_scheduled = False
        acks, self._acks = self._acks, None
        pending, self._pending_acks = self._pending_acks, {}
        epoch = self.epoch
        if acks is not None:
            if len(self._ring) < self.factor - 1 or not epoch:
                self._count_short(acks)
            acks.sent_to({link.node for link in self._ring} if epoch else set())
        copying = {link.node for copy in self._copies for link in copy.links}
        for link in list(self.links.values()):
            waiting = pending.get(link.node, [])
            if waiting and link.node in copying:  # their messages may be in the copy's later slices
                self._pending_acks[link.node] = waiting
                waiting = []
            if acks is not None and link.node in acks.holders:
                waiting = [*waiting, acks]
            if not epoch:
                link.writer.take_parts()  # nothing leaves without an epoch
                continue
            if (link.writer or waiting) and not link.send(self.node, epoch, waiting):
                for lost in waiting:  # it went down since: its replacement answers instead
                    self._replace(lost, link.node)

    # --- as a peer -------------------------------------------------------------------------------

    def check_proof(self, nonce: bytes, node: str, proof: bytes) -> None:
        """Raises ``NotAMember`` unless ``proof`` answers ``nonce`` under the cluster's secret."""
        if self.secret is None or not proves_membership(self.secret, nonce, node, proof):
            raise NotAMember(f"RAUTH from {node!r} is not proved with this cluster's secret")

    def receive(self, origin: str, epoch: int, payload: bytes) -> "asyncio.Future | None":
        """A ``REPL`` batch about ``origin``, from a connection that proved
        it is a member; raises ``ReplicationError``.
        -> with --replication-ack=disk, what resolves once it is fsynced."""
        key = (origin, epoch)
        shadow = self.shadows.get(key)
        if shadow is None:
            if origin == self.node:
                raise ReplicationError("a batch from this node itself")
            if not NODE_NAME.fullmatch(origin) or not epoch:
                raise ReplicationError(f"origin {origin!r} epoch {epoch} is no node's")
        records = list(read_records(payload))  # all of it parses, or none of it counts
        if shadow is None:
            shadow = self.shadows[key] = self._new_shadow(origin, epoch)
        shadow.apply(records)
        if shadow.spill_failure is not None:
            self._peer_trouble.error(f"REPLICATION: cannot write copies of {origin} to disk "
                                     f"({shadow.spill_failure}): holding them in memory")
        logs = self.logs
        if logs is None:
            return None
        if key in self._busy or logs.size(origin, epoch) + len(payload) <= logs.rewrite_threshold(origin, epoch):
            return logs.append(origin, epoch, payload)  # (a log is not rewritten under a shadow set aside)
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
            "fenced": self.fenced,
            "peers": peers,
            "shadows": [{"origin": origin, "epoch": epoch, "messages": len(shadow),
                         "spilled_bytes": shadow.spilled_bytes}
                        for (origin, epoch), shadow in sorted(self.shadows.items())],
            "takeovers": self.takeovers,
            "adopted_messages": self.adopted,
            "under_replicated_messages": self.under_replicated,
            "lost_epochs": [{"origin": origin, "epochs": count} for origin, count in sorted(self.lost.items())],
            # adoptions are remembered for as many epochs as departures (ADOPTIONS_KEPT, KEPT)
            "departed": self.departed.entries(lambda key: len(self._adopted.get(key, ()))),
        }


def _node_id_taken(node_id: int, holder: str) -> StartupError:
    return StartupError(f"--node-id {node_id} is also the node id of replicated nsqd {holder}: message ids would "
                        "collide; give each nsqd its own --node-id")


MIN_SECRET_BYTES = 16


def _read_secret(path: str) -> bytes:
    """--replication-secret-file's secret (surrounding whitespace is not part of it)."""
    try:
        with open(path, "rb") as file:
            secret = file.read().strip()
    except OSError as error:
        raise StartupError(f"--replication-secret-file: cannot read {path}: {error.strerror}") from None
    if len(secret) < MIN_SECRET_BYTES:
        raise StartupError(f"--replication-secret-file: {path} holds {len(secret)} bytes; a secret needs at "
                           f"least {MIN_SECRET_BYTES} (e.g. the output of `openssl rand -hex 32`)")
    return secret


def signing_key(secret: bytes) -> bytes:
    """The key membership is proved with, from a secret of any size."""
    return hashlib.sha256(b"nsqpy REPL key\n" + secret).digest()
