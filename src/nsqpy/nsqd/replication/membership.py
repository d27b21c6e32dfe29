"""A replicated nsqd's place in etcd.

Keys under ``--replication-prefix``:

- ``members/<node>``: this nsqd while its lease lives (``<node>`` is its
  broadcast ``host:tcp_port``; the value says its ports, node id and
  epoch). The lease id is the node's *epoch*: a restart, or a node that
  lost its lease, comes back under a new one.
- ``takeover/<node>/<epoch>``: who owns what that epoch of ``<node>``
  accepted once it ended. Created once, by a transaction that only one
  contender wins: a survivor holding a shadow of it, or the node itself
  (a clean stop, or a restart that finds nobody took it).
- ``secret``: what members sign their ``REPL`` batches with, unless
  every node is given ``--replication-secret-file``.
"""

import asyncio
import json
import secrets
import time

from .etcd import Etcd


class AddressTaken(Exception):
    """Another live nsqd is a member under this node's address: what it registered."""


class Membership:
    def __init__(self, etcd: Etcd, prefix: str, node: str, lease_ttl: int):
        self.etcd = etcd
        self.prefix = prefix.rstrip("/")
        self.node = node
        self.lease_ttl = lease_ttl
        self.epoch = 0

    def _member_key(self, node: str) -> str:
        return f"{self.prefix}/members/{node}"

    def _takeover_key(self, node: str, epoch: int) -> str:
        return f"{self.prefix}/takeover/{node}/{epoch}"

    async def cluster_secret(self) -> str:
        """The secret every member signs its ``REPL`` batches with: made
        by the first node that asks, kept under the prefix."""
        _, secret = await self.etcd.create(f"{self.prefix}/secret", secrets.token_hex(32))
        return secret

    async def join(self, info: dict) -> int:
        """A new lease (the new epoch) and the member key on it, unless a
        live node holds that key: an address is one node's. A node that
        died at this address frees it once its lease ends, so the key is
        tried for a lease's time (and a little) before giving up.
        Raises ``AddressTaken``."""
        key = self._member_key(self.node)
        deadline = time.monotonic() + self.lease_ttl + 1
        while True:
            lease = await self.etcd.grant(self.lease_ttl)  # a fresh one each try: none ages while it waits
            created, holder = await self.etcd.create(key, json.dumps({**info, "epoch": lease}), lease=lease)
            if created:
                self.epoch = lease
                return lease
            await self.etcd.revoke(lease)
            if time.monotonic() >= deadline:
                try:
                    registered = json.loads(holder)
                    raise AddressTaken(f"node id {registered['node_id']}, epoch {registered['epoch']}")
                except (ValueError, KeyError, TypeError):
                    raise AddressTaken(holder) from None
            await asyncio.sleep(0.2)

    async def renew(self) -> bool:
        """False when the lease has ended: others may have taken this epoch over."""
        return await self.etcd.keep_alive(self.epoch) > 0

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

    async def claim(self, node: str, epoch: int, as_node: str | None = None) -> str:
        """Try to own ``node``'s ``epoch``, under this node's name (or
        ``as_node``'s: a node that came back under another address keeps
        what it had as the node it was). -> who owns it (the name claimed
        under, if won)."""
        _, owner = await self.etcd.create(self._takeover_key(node, epoch), as_node or self.node)
        return owner

    async def owner(self, node: str, epoch: int) -> str | None:
        return await self.etcd.get(self._takeover_key(node, epoch))

    async def end_lease(self, epoch: int) -> None:
        await self.etcd.revoke(epoch)
