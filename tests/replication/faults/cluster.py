"""Replicated nsqd whose every link can be cut on its own: each node
reaches etcd through a proxy of its own (``--etcd-endpoint`` is the
proxy), so etcd can be cut from one node while the others keep it; and,
``fronted``, each node's TCP and HTTP ports are behind proxies it
advertises (``--broadcast-tcp-port``, ``--broadcast-http-port``), so its
name is the proxy's address and peers, consumers and publishers all come
through it: cutting it cuts the node from everyone who dials it.

Otherwise a cluster as ``tests/replication/conftest.py`` starts one (etcd,
nsqlookupd, R=2, a 3 s lease, a 10 s message timeout, one replication
secret file for all)."""

import contextlib
from pathlib import Path
from urllib.parse import urlsplit

from nsqpy.localcluster import DaemonProcess, free_port
from tests.replication.conftest import Replicated
from tests.support.proxy import Proxy

LEASE = 3.0


class FaultCluster(Replicated):
    def __init__(self, stack: contextlib.ExitStack, tmp_path: Path, count: int = 3, factor: int = 2, *,
                 fronted: bool = False, nsqd_args: tuple[str, ...] = ()):
        self.fronted = fronted
        self.etcd_proxies: dict[int, Proxy] = {}
        self.client_proxies: dict[int, tuple[Proxy, Proxy]] = {}
        self.node_of_name: dict[str, int] = {}
        super().__init__(stack, tmp_path, count, factor, nsqd_args=nsqd_args)

    def start(self, index: int, *, new_ports: bool = False) -> DaemonProcess:
        """``new_ports``: the node comes back under another address (and,
        fronted, behind new proxies: another name)."""
        path = self.tmp_path / f"nsqd{index}"
        path.mkdir(exist_ok=True)
        if index not in self.etcd_proxies:
            etcd = urlsplit(self.etcd.client_url)
            self.etcd_proxies[index] = self.stack.enter_context(Proxy(etcd.hostname, etcd.port))
        if new_ports:
            self.ports[index] = (free_port(), free_port())
            for proxy in self.client_proxies.pop(index, ()):
                proxy.close()
        tcp, http = self.ports[index]
        if self.fronted and index not in self.client_proxies:
            self.client_proxies[index] = (self.stack.enter_context(Proxy("127.0.0.1", tcp)),
                                          self.stack.enter_context(Proxy("127.0.0.1", http)))
        advertised = [f"--broadcast-tcp-port={self.client_proxies[index][0].port}",
                      f"--broadcast-http-port={self.client_proxies[index][1].port}"] if self.fronted else []
        daemon = DaemonProcess("nsqd", [
            f"--tcp-address=127.0.0.1:{tcp}", f"--http-address=127.0.0.1:{http}", "--https-address=127.0.0.1:0",
            f"--data-path={path}", "--broadcast-address=127.0.0.1", *advertised, f"--node-id={index + 1}",
            f"--lookupd-tcp-address={self.lookupd.tcp_address}", f"--replication-factor={self.factor}",
            f"--etcd-endpoint=http://{self.etcd_proxies[index].address}",
            f"--replication-lease={LEASE:g}s", "--msg-timeout=10s", f"--replication-secret-file={self.secret_file}",
            *self.nsqd_args,
        ])
        self.stack.enter_context(daemon)
        self.nsqds[index] = daemon
        self.node_of_name[self.name(index)] = index
        return daemon

    def name(self, index: int) -> str:
        """The node's name: the address it advertises (its proxy's, fronted)."""
        port = self.client_proxies[index][0].port if self.fronted else self.ports[index][0]
        return f"127.0.0.1:{port}"

    def successor(self, index: int) -> int:
        """The node holding ``index``'s copies with R=2: the next running
        node by name, wrapping, as nodes order their peers."""
        names = sorted(self.name(i) for i, daemon in enumerate(self.nsqds)
                       if daemon is not None and daemon.process.poll() is None)
        return self.node_of_name[names[(names.index(self.name(index)) + 1) % len(names)]]

    def proxies(self, index: int) -> list[Proxy]:
        """Every proxy in front of node ``index``: etcd's, then its clients' (fronted)."""
        return [self.etcd_proxies[index], *self.client_proxies.get(index, ())]
