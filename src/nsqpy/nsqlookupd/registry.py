"""nsqlookupd's registration database.

A registration is ``(category, key, subkey)``: ``("client", "", "")`` for
every identified nsqd, ``("topic", topic, "")`` and ``("channel", topic,
channel)`` for what they host. Each maps peer id -> Producer. Lookups take
``"*"`` as a wildcard for key or subkey.

Nothing here reads a clock by itself: ``clock`` is injected (seconds), so the
inactivity and tombstone rules are tested without waiting.
"""

import time
from dataclasses import dataclass, field

from ..protocol.names import is_ephemeral

Registration = tuple[str, str, str]


@dataclass
class PeerInfo:
    id: str  # the peer's remote address: unique per connection
    remote_address: str
    hostname: str = ""
    broadcast_address: str = ""
    tcp_port: int = 0
    http_port: int = 0
    version: str = ""
    topology_zone: str = ""
    topology_region: str = ""
    last_update: float = 0.0

    @property
    def node(self) -> str:
        """How operators name a node: ``broadcast_address:http_port``."""
        return f"{self.broadcast_address}:{self.http_port}"

    def public(self) -> dict:
        return {"remote_address": self.remote_address, "hostname": self.hostname,
                "broadcast_address": self.broadcast_address, "tcp_port": self.tcp_port,
                "http_port": self.http_port, "version": self.version}


@dataclass
class Producer:
    peer: PeerInfo
    tombstoned: bool = False
    tombstoned_at: float = 0.0

    def tombstone(self, now: float) -> None:
        self.tombstoned = True
        self.tombstoned_at = now

    def is_tombstoned(self, lifetime: float, now: float) -> bool:
        return self.tombstoned and now - self.tombstoned_at < lifetime


@dataclass
class RegistrationDB:
    clock: callable = time.time
    registrations: dict[Registration, dict[str, Producer]] = field(default_factory=dict)

    def add_registration(self, registration: Registration) -> None:
        self.registrations.setdefault(registration, {})

    def add_producer(self, registration: Registration, producer: Producer) -> bool:
        producers = self.registrations.setdefault(registration, {})
        if producer.peer.id in producers:
            return False
        producers[producer.peer.id] = producer
        return True

    def remove_producer(self, registration: Registration, peer_id: str) -> tuple[bool, int]:
        """-> (removed, producers left)."""
        producers = self.registrations.get(registration)
        if producers is None:
            return False, 0
        removed = producers.pop(peer_id, None) is not None
        return removed, len(producers)

    def remove_registration(self, registration: Registration) -> None:
        self.registrations.pop(registration, None)

    def find_registrations(self, category: str, key: str, subkey: str) -> list[Registration]:
        return [r for r in self.registrations
                if r[0] == category and key in ("*", r[1]) and subkey in ("*", r[2])]

    def find_producers(self, category: str, key: str, subkey: str) -> list[Producer]:
        seen: dict[str, Producer] = {}
        for registration in self.find_registrations(category, key, subkey):
            for peer_id, producer in self.registrations[registration].items():
                seen.setdefault(peer_id, producer)
        return list(seen.values())

    def registrations_of(self, peer_id: str) -> list[Registration]:
        return [r for r, producers in self.registrations.items() if peer_id in producers]

    def remove_peer(self, peer_id: str) -> None:
        """A peer's connection closed: it no longer produces anything."""
        for registration in self.registrations_of(peer_id):
            self.remove_producer(registration, peer_id)

    def unregister(self, peer_id: str, topic: str, channel: str | None) -> None:
        """UNREGISTER: ephemeral registrations go away with their last producer."""
        if channel:
            registration = ("channel", topic, channel)
            _, left = self.remove_producer(registration, peer_id)
            if left == 0 and is_ephemeral(channel):
                self.remove_registration(registration)
            return
        for registration in self.find_registrations("channel", topic, "*"):
            _, left = self.remove_producer(registration, peer_id)
            if left == 0 and is_ephemeral(registration[2]):
                self.remove_registration(registration)
        _, left = self.remove_producer(("topic", topic, ""), peer_id)
        if left == 0 and is_ephemeral(topic):
            self.remove_registration(("topic", topic, ""))

    # --- what /lookup and /nodes show ---------------------------------------------

    def active(self, producers: list[Producer], inactive_timeout: float, tombstone_lifetime: float) -> list[Producer]:
        """Producers heard from within ``inactive_timeout`` and not tombstoned."""
        now = self.clock()
        return [p for p in producers
                if now - p.peer.last_update <= inactive_timeout
                and not p.is_tombstoned(tombstone_lifetime, now)]

    def live(self, producers: list[Producer], inactive_timeout: float) -> list[Producer]:
        """Producers heard from within ``inactive_timeout`` (tombstoned ones included)."""
        now = self.clock()
        return [p for p in producers if now - p.peer.last_update <= inactive_timeout]
