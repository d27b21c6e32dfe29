"""contrib/: the systemd units start the daemons as they are written, with
the example configs, and tell systemd when each is ready and when it stops
(``Type=notify``); the example configs say what the daemons do by default."""

import shlex
import signal
import socket
import sys
from pathlib import Path

import pytest

from nsqpy.cli.flags import load_config
from nsqpy.localcluster import DaemonProcess
from nsqpy.nsqadmin.options import NsqadminOptions
from nsqpy.nsqd.options import NsqdOptions
from nsqpy.nsqlookupd.options import NsqlookupdOptions
from tests.support.wire import http, http_json, wait_until

CONTRIB = Path(__file__).parents[2] / "contrib"
OPTIONS = {"nsqd": NsqdOptions, "nsqlookupd": NsqlookupdOptions, "nsqadmin": NsqadminOptions}
# what an example config sets on purpose: where to listen, where the others are, where the data goes
DEPLOYMENT_KEYS = {"tcp_address", "http_address", "nsqlookupd_tcp_addresses", "nsqlookupd_http_addresses",
                   "data_path"}


def unit_setting(daemon: str, key: str) -> str:
    lines = (CONTRIB / "systemd" / f"{daemon}.service").read_text().splitlines()
    values = [line.split("=", 1)[1] for line in lines if line.startswith(f"{key}=")]
    assert len(values) == 1, f"{daemon}.service: {key} set {len(values)} times"
    return values[0]


def example_config(daemon: str) -> Path:
    """The config file the unit names, from contrib/config."""
    program, *args = shlex.split(unit_setting(daemon, "ExecStart"))
    assert Path(program).name == daemon and args[0].startswith("--config=/etc/nsqpy/"), args
    return CONTRIB / "config" / Path(args[0].split("=", 1)[1]).name


class NotifySocket:
    """systemd's end of the readiness protocol: a datagram socket in ``NOTIFY_SOCKET``."""

    def __init__(self, path: Path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(30)

    def next_state(self) -> str:
        return self.sock.recv(4096).decode()


class Unit:
    """A daemon started from its unit's ExecStart (the venv's console script,
    the example config), with test ports and directories on the command line,
    which wins over the file."""

    def __init__(self, daemon: str, tmp_path: Path, *overrides: str):
        self.notify = NotifySocket(tmp_path / f"{daemon}.notify")
        program = str(Path(sys.executable).with_name(daemon))
        self.process = DaemonProcess(daemon, [f"--config={example_config(daemon)}", *overrides],
                                     ready=("HTTP",), executable=program, env={"NOTIFY_SOCKET": self.notify.path})

    def __enter__(self) -> DaemonProcess:
        self.process.start()
        assert self.notify.next_state() == "READY=1"
        return self.process

    def __exit__(self, *exc) -> None:
        try:
            self.process.process.send_signal(signal.SIGTERM)
            assert self.notify.next_state() == "STOPPING=1"
            assert self.process.process.wait(60) == 0, self.process.output
        finally:
            self.process.kill()
            self.notify.sock.close()


def test_the_units_start_a_cluster_that_serves_and_stops_cleanly(tmp_path):
    listen = ("--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0")
    with Unit("nsqlookupd", tmp_path, *listen, "--broadcast-address=127.0.0.1") as lookupd, \
            Unit("nsqd", tmp_path, *listen, "--https-address=", "--broadcast-address=127.0.0.1",
                 f"--data-path={tmp_path}", f"--lookupd-tcp-address={lookupd.tcp_address}") as nsqd, \
            Unit("nsqadmin", tmp_path, "--http-address=127.0.0.1:0",
                 f"--lookupd-http-address={lookupd.http_address}") as nsqadmin:
        assert http("POST", f"{nsqd.http_url}/pub?topic=contrib", b"hello")[0] == 200
        wait_until(lambda: http_json("GET", f"{lookupd.http_url}/lookup?topic=contrib")[0] == 200, timeout=10)
        _, nodes = http_json("GET", f"http://{nsqadmin.http_address}/api/nodes")
        assert [node["tcp_port"] for node in nodes["nodes"]] == [int(nsqd.tcp_address.rsplit(":", 1)[1])]


def test_nsqds_data_path_is_the_state_directory_systemd_makes():
    data_path = load_config(str(example_config("nsqd")), NsqdOptions)["data_path"]
    assert data_path == f"/var/lib/{unit_setting('nsqd', 'StateDirectory')}"


@pytest.mark.parametrize("daemon", sorted(OPTIONS))
def test_an_example_config_sets_the_defaults_but_for_where_to_listen_and_store(daemon):
    """Every key it sets is one the daemon reads, with its default value:
    the file documents the defaults and changes only the deployment."""
    path = example_config(daemon)
    keys = [line.split("=", 1)[0].strip() for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#") and "=" in line]
    values = load_config(str(path), OPTIONS[daemon])
    assert len(values) == len(keys), f"{path.name}: keys the daemon does not read: {keys}"
    defaults = OPTIONS[daemon]()
    changed = {field for field, value in values.items() if getattr(defaults, field) != value}
    assert changed <= DEPLOYMENT_KEYS, f"{path.name}: {changed - DEPLOYMENT_KEYS} differ from the defaults"
