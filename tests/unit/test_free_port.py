"""free_port: test workers side by side are never handed the same port
while a daemon that must come back on it has not bound it yet."""

import os

from nsqpy import localcluster


def test_a_port_handed_out_is_not_handed_out_again_while_reserved(tmp_path, monkeypatch):
    monkeypatch.setattr(localcluster, "PORT_RESERVATIONS", str(tmp_path))
    ports = [localcluster.free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert sorted(int(name) for name in os.listdir(tmp_path)) == sorted(ports)


def test_an_old_reservation_is_taken_over(tmp_path, monkeypatch):
    monkeypatch.setattr(localcluster, "PORT_RESERVATIONS", str(tmp_path))
    (tmp_path / "20000").touch()
    assert not localcluster._reserved(20000)
    os.utime(tmp_path / "20000", (0, 0))
    assert localcluster._reserved(20000)
    assert not localcluster._reserved(20000)
