"""nsqlookupd's registration DB, driven by an injected clock."""

from nsqpy.nsqlookupd.registry import PeerInfo, Producer, RegistrationDB


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def peer(n: int, clock: Clock) -> Producer:
    return Producer(PeerInfo(id=f"10.0.0.{n}:5000", remote_address=f"10.0.0.{n}:5000",
                             broadcast_address=f"node{n}", tcp_port=4150, http_port=4151,
                             version="1.3.0", last_update=clock()))


def test_register_find_and_wildcards():
    clock = Clock()
    db = RegistrationDB(clock)
    a, b = peer(1, clock), peer(2, clock)
    db.add_producer(("topic", "t", ""), a)
    db.add_producer(("channel", "t", "c1"), a)
    db.add_producer(("topic", "t", ""), b)
    db.add_producer(("channel", "t", "c2"), b)
    db.add_producer(("topic", "u", ""), b)
    assert not db.add_producer(("topic", "t", ""), a)  # already there
    assert sorted(r[2] for r in db.find_registrations("channel", "t", "*")) == ["c1", "c2"]
    assert sorted(r[1] for r in db.find_registrations("topic", "*", "")) == ["t", "u"]
    assert {p.peer.id for p in db.find_producers("topic", "t", "")} == {a.peer.id, b.peer.id}
    assert {p.peer.id for p in db.find_producers("channel", "*", "*")} == {a.peer.id, b.peer.id}
    assert sorted(db.registrations_of(b.peer.id)) == [("channel", "t", "c2"), ("topic", "t", ""), ("topic", "u", "")]


def test_unregister_keeps_durable_and_drops_ephemeral_registrations():
    clock = Clock()
    db = RegistrationDB(clock)
    a = peer(1, clock)
    for registration in [("topic", "t", ""), ("channel", "t", "c"), ("channel", "t", "e#ephemeral"),
                         ("topic", "x#ephemeral", ""), ("channel", "x#ephemeral", "c")]:
        db.add_producer(registration, a)
    db.unregister(a.peer.id, "t", "e#ephemeral")
    assert ("channel", "t", "e#ephemeral") not in db.registrations
    db.unregister(a.peer.id, "t", None)
    assert db.registrations[("topic", "t", "")] == {} and db.registrations[("channel", "t", "c")] == {}
    db.unregister(a.peer.id, "x#ephemeral", None)
    assert ("topic", "x#ephemeral", "") not in db.registrations


def test_remove_peer_removes_it_everywhere():
    clock = Clock()
    db = RegistrationDB(clock)
    a, b = peer(1, clock), peer(2, clock)
    for p in (a, b):
        db.add_producer(("client", "", ""), p)
        db.add_producer(("topic", "t", ""), p)
    db.remove_peer(a.peer.id)
    assert [p.peer.id for p in db.find_producers("topic", "t", "")] == [b.peer.id]
    assert [p.peer.id for p in db.find_producers("client", "", "")] == [b.peer.id]


def test_inactive_and_tombstoned_producers_are_filtered():
    clock = Clock()
    db = RegistrationDB(clock)
    a, b = peer(1, clock), peer(2, clock)
    producers = [a, b]
    assert db.active(producers, inactive_timeout=300, tombstone_lifetime=45) == producers
    b.tombstone(clock())
    assert db.active(producers, 300, 45) == [a]
    assert db.live(producers, 300) == producers  # /nodes still lists a tombstoned producer
    clock.now += 46
    assert db.active(producers, 300, 45) == producers  # the tombstone expired
    clock.now += 300
    a.peer.last_update = clock()  # a PINGed, b did not
    assert db.active(producers, 300, 45) == [a] and db.live(producers, 300) == [a]
