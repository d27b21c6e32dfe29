"""The faults a schedule applies to one node, by name, and what undoes
each. The node's state between a failure and its recovery is kept here,
so that the end of a run can heal whatever is still out, and so that a
frozen node is woken before the cluster is stopped, even on failure."""

import signal

from tests.support.proxy import Proxy

from .cluster import FaultCluster

#: each failure, and the steps that end it
RECOVERIES = {
    "cut-etcd": ("heal-etcd",),
    "cut-clients": ("heal-clients",),
    "freeze": ("thaw",),
    "stop": ("restart", "restart-new-ports"),
    "kill": ("restart", "restart-new-ports"),
}


class Faults:
    def __init__(self, cluster: FaultCluster):
        self.cluster = cluster
        self.out: dict[int, str] = {}  # node -> the failure it is under
        self.actions = {
            "cut-etcd": lambda node: cluster.etcd_proxies[node].cut(),
            "heal-etcd": lambda node: cluster.etcd_proxies[node].heal(),
            "cut-clients": lambda node: self._clients(node, Proxy.cut),
            "heal-clients": lambda node: self._clients(node, Proxy.heal),
            "freeze": self._freeze,
            "thaw": lambda node: self._signal(node, signal.SIGCONT),
            "stop": lambda node: cluster.nsqds[node].stop(),
            "kill": lambda node: cluster.nsqds[node].kill(),
            "restart": cluster.start,
            "restart-new-ports": lambda node: cluster.start(node, new_ports=True),
        }

    def apply(self, fault: str, node: int) -> None:
        self.actions[fault](node)
        if fault in RECOVERIES:
            self.out[node] = fault
        else:
            self.out.pop(node, None)

    def heal_all(self) -> None:
        """Every cut healed, every frozen node woken, every stopped node
        started again (its messages are in its data dir): a killed node
        stays dead, what it held is its successor's to deliver."""
        for node, failure in list(self.out.items()):
            if failure != "kill":
                self.apply(RECOVERIES[failure][0], node)

    def _clients(self, node: int, action) -> None:
        for proxy in self.cluster.client_proxies[node]:
            action(proxy)

    def _freeze(self, node: int) -> None:
        self._signal(node, signal.SIGSTOP)
        self.cluster.stack.callback(self._signal, node, signal.SIGCONT)  # before the daemon's stop

    def _signal(self, node: int, number: int) -> None:
        process = self.cluster.nsqds[node].process
        if process.poll() is None:
            process.send_signal(number)
