"""A replicated nsqd's place in etcd.

Keys under ``--replication-prefix``:

- ``members/<node>``: this nsqd while its lease lives (``<node>`` is its
  broadcast ``host:tcp_port``; the value says its ports, node id and
  epoch). The lease id is the node's *epoch*: a restart, or a node that
  lost its lease, comes back under a new one.
- ``node-ids/<id>``: the same lease's claim on ``--node-id`` (message ids
  carry it), created in the same transaction as the member key: two
  nsqd that start together with one id cannot both join.
- ``takeover/<node>/<epoch>``: who owns what that epoch of ``<node>``
  accepted once it ended, and under which of its own epochs. Created
  once, by a transaction that only one contender wins: a survivor
  holding a shadow of it, or the node itself (a clean stop, or a restart
  that finds nobody took it); taken again, by the same kind of
  transaction, only from an owner whose own epoch has ended since.
- ``secret``: what members sign their ``REPL`` batches with, unless
  every node is given ``--replication-secret-file``.

Leases and clocks
=================

etcd counts a lease's TTL from the moment it takes a renewal in; the
node counts its own *deadline* from the moment it sent that renewal,
which is earlier, and ends it ``DRIFT`` of a lease sooner still. A
survivor claims an ended epoch only ``DRIFT`` of a lease after it saw
the lease gone. Between a node's deadline and the earliest takeover
there is thus at least ``2 * DRIFT`` of a lease (1 s with the default
3 s lease): the clocks of the node and of etcd may run that far apart
within one lease, and a node past its deadline acknowledges and
delivers nothing (replicator.py), so no survivor ever owns what its
origin still hands out.
"""

import asyncio
import json
import secrets
import time
from typing import NamedTuple

from .etcd import Etcd

DRIFT = 1 / 6  # of a lease: the clock-rate difference allowed for, on the node's side and on a survivor's


def clock() -> float:
    """Seconds that go on while the machine is suspended (a laptop lid, a
    host's suspend): a lease goes on ending meanwhile, as etcd counts it."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class AddressTaken(Exception):
    """Another live nsqd is a member under this node's address: what it registered."""


class NodeIdTaken(Exception):
    """Another live nsqd joined with this ``--node-id``: its address."""


class Owner(NamedTuple):
    """Who owns an ended epoch: a node, and its own epoch when it claimed
    (0: the ended epoch's own node kept it, at a clean stop or a restart,
    or a value written before epochs were kept, a bare node name)."""

    node: str
    epoch: int
    stored: str = ""  # the key's value as etcd holds it: what a claim from this owner compares

    @classmethod
    def parse(cls, value: str) -> "Owner":
        try:
            found = json.loads(value)
            return cls(str(found["node"]), int(found["epoch"]), value)
        except (ValueError, KeyError, TypeError):
            return cls(value, 0, value)

    def value(self) -> str:
        return json.dumps({"node": self.node, "epoch": self.epoch})


class Membership:
    def __init__(self, etcd: Etcd, prefix: str, node: str, lease_ttl: int):
        self.etcd = etcd
        self.prefix = prefix.rstrip("/")
        self.node = node
        self.lease_ttl = lease_ttl
        self.epoch = 0
        self.deadline = 0.0  # (clock()) until when this node may take its lease for alive

    def _member_key(self, node: str) -> str:
        return f"{self.prefix}/members/{node}"

    def _node_id_key(self, node_id: int) -> str:
        return f"{self.prefix}/node-ids/{node_id}"

    def _takeover_key(self, node: str, epoch: int) -> str:
        return f"{self.prefix}/takeover/{node}/{epoch}"

    @property
    def margin(self) -> float:
        """``DRIFT`` of a lease, in seconds."""
        return self.lease_ttl * DRIFT

    def _renewed(self, sent: float, ttl: int) -> None:
        """etcd took a renewal (or a grant) sent at ``sent`` in: the lease
        lives ``ttl`` seconds from when etcd took it, later than ``sent``."""
        self.deadline = max(self.deadline, sent + ttl - self.margin)

    async def cluster_secret(self) -> str:
        """The secret every member signs its ``REPL`` batches with: made
        by the first node that asks, kept under the prefix."""
        _, secret = await self.etcd.create(f"{self.prefix}/secret", secrets.token_hex(32))
        return secret

    async def join(self, info: dict) -> int:
        """A new lease (the new epoch) with the member key and the node
        id's key on it, both or neither, unless a live node holds one of
        them: an address and a node id are one node's. A node that died
        with them frees them once its lease ends, so they are tried for a
        lease's time (and a little) before giving up.
        Raises ``AddressTaken`` or ``NodeIdTaken``."""
        member_key, node_id_key = self._member_key(self.node), self._node_id_key(info["node_id"])
        deadline = time.monotonic() + self.lease_ttl + 1
        while True:
            sent = clock()
            lease, ttl = await self.etcd.grant(self.lease_ttl)  # a fresh one each try: none ages while it waits
            holders = await self.etcd.create_all({member_key: json.dumps({**info, "epoch": lease}),
                                                  node_id_key: self.node}, lease=lease)
            if holders is None:
                self.epoch = lease
                self.deadline = 0.0
                self._renewed(sent, ttl)
                return lease
            await self.etcd.revoke(lease)
            if time.monotonic() >= deadline:
                if node_id_key in holders:
                    raise NodeIdTaken(holders[node_id_key])
                raise AddressTaken(_registered(holders.get(member_key, "")))
            await asyncio.sleep(0.2)

    async def renew(self) -> bool:
        """False when the lease has ended: others may have taken this epoch over."""
        sent = clock()
        ttl = await self.etcd.keep_alive(self.epoch)
        if ttl > 0:
            self._renewed(sent, ttl)
        return ttl > 0

    def lease_left(self) -> float:
        """Seconds this node's lease is surely alive for as etcd counts it
        (its last renewal is recent enough: see Leases and clocks); 0 or
        less once it may have ended."""
        return self.deadline - clock()

    async def renewed_by_another(self, epoch: int) -> bool:
        """Whether a live process renews ``epoch``'s lease (a copy of this
        data dir runs, or its first start does): True once its remaining
        time has gone up twice, False once the lease ends. A crashed
        node's lease is never renewed again, and ends within a lease;
        twice, because etcd itself extends every lease once when it
        changes leader."""
        raises = 0
        last = None
        limit = time.monotonic() + 3 * self.lease_ttl
        while time.monotonic() < limit:
            remaining = await self.etcd.time_to_live(epoch)
            if remaining < 0:
                return False
            if last is not None and remaining > last:
                raises += 1
                if raises == 2:
                    return True
            last = remaining
            await asyncio.sleep(0.25)
        return True  # still not ended after three leases: renewed all along, between two looks

    async def member(self, node: str) -> dict | None:
        """What ``node`` registered, while its lease lives."""
        value = await self.etcd.get(self._member_key(node))
        try:
            return None if value is None else json.loads(value)
        except ValueError:
            return None

    async def node_id_holder(self, node_id: int) -> str | None:
        """The node that joined with ``node_id``, while its lease lives."""
        return await self.etcd.get(self._node_id_key(node_id))

    async def members(self) -> dict[str, dict]:
        """Every live member but this one: node -> what it registered."""
        found = {}
        prefix = self._member_key("")
        for key, value in (await self.etcd.get_prefix(prefix)).items():
            node = key[len(prefix):]
            try:
                info = json.loads(value)
                info["epoch"] = int(info["epoch"])
            except (ValueError, KeyError, TypeError):
                continue
            if node != self.node:
                found[node] = info
        return found

    async def claim(self, node: str, epoch: int, as_node: str | None = None) -> Owner:
        """Try to own ``node``'s ``epoch``, under this node's name and
        epoch (or as ``as_node``, epoch 0: a node that came back, under
        another address perhaps, keeps what it had as the node it was).
        -> who owns it (this node, if won)."""
        mine = Owner(as_node, 0) if as_node else Owner(self.node, self.epoch)
        _, owner = await self.etcd.create(self._takeover_key(node, epoch), mine.value())
        return Owner.parse(owner)

    async def claim_from(self, node: str, epoch: int, gone: Owner, as_node: str | None = None) -> Owner:
        """Own ``node``'s ``epoch`` in place of ``gone``, an owner whose
        own epoch has ended since it claimed (before it confirmed what
        the others held), as ``claim`` would. -> who owns it now."""
        mine = Owner(as_node, 0) if as_node else Owner(self.node, self.epoch)
        key = self._takeover_key(node, epoch)
        _, owner = await self.etcd.replace(key, gone.stored or gone.value(), mine.value())
        if not owner:  # nobody owns it any more (the prefix was cleared): an ordinary claim
            _, owner = await self.etcd.create(key, mine.value())
        return Owner.parse(owner)

    async def owner(self, node: str, epoch: int) -> Owner | None:
        value = await self.etcd.get(self._takeover_key(node, epoch))
        return None if value is None else Owner.parse(value)

    async def end_lease(self, epoch: int) -> None:
        await self.etcd.revoke(epoch)


def _registered(value: str) -> str:
    """A member key's value, as a person reads it."""
    try:
        registered = json.loads(value)
        return f"node id {registered['node_id']}, epoch {registered['epoch']}"
    except (ValueError, KeyError, TypeError):
        return value
