"""Run nsqpy daemons as real subprocesses: the ``nsqpy cluster`` command,
``make run``, the tests and the benchmarks all start daemons this way.

A daemon's ``TCP: listening on`` / ``HTTP: listening on`` log lines tell
where it is (port 0 means an ephemeral port). ``stop()`` always leaves no
process behind (SIGTERM, then SIGKILL).
"""

import concurrent.futures
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque

from .supervision import PARENT_ENV

_LISTENING = re.compile(r"(TCP|HTTP|HTTPS): listening on (\S+)")


# The kernel sends the parent-death signal when the *thread* that forked the
# child ends, not the process: daemons are forked by this one thread, which
# lives as long as the process, whichever thread asks for them.
_spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsqpy-spawner")


def _spawn(command: list[str], env: dict, **popen_args) -> subprocess.Popen:
    env = {**env, PARENT_ENV: str(os.getpid())}
    return _spawner.submit(subprocess.Popen, command, env=env, **popen_args).result()


class DaemonProcess:
    def __init__(self, program: str, args: list[str], *, ready: tuple[str, ...] = ("TCP", "HTTP"),
                 env: dict | None = None, log_path: str | None = None, wrapper: tuple[str, ...] = (),
                 executable: str | None = None):
        """``log_path``: append the daemon's log there and keep only its last
        lines in memory (for long runs); without it every line is kept.
        ``wrapper``: a command the daemon runs under, e.g. ``prlimit --nofile=128 --``.
        ``executable``: another program to run in place of ours, e.g. NSQ's
        own Go ``nsqd`` for a benchmark side by side (same flags, same log lines)."""
        self.program = program
        self.args = list(args)
        self.ready = ready
        self.env = env
        self.log_path = log_path
        self.wrapper = tuple(wrapper)
        self.executable = executable
        self.addresses: dict[str, str] = {}
        self.log_lines: deque[str] = deque(maxlen=200 if log_path else None)
        self.process: subprocess.Popen | None = None
        self._lines_changed = threading.Condition()

    @property
    def command(self) -> list[str]:
        program = [self.executable] if self.executable else [sys.executable, "-m", f"nsqpy.cli.{self.program}"]
        return [*self.wrapper, *program, *self.args]

    def start(self, timeout: float = 15.0) -> "DaemonProcess":
        self.addresses = {}
        self.process = _spawn(
            self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env={**os.environ, **(self.env or {})}, text=True, errors="replace",
            # its own session: a terminal's Ctrl-C reaches only whoever supervises it,
            # which stops daemons in order (nsqd before nsqlookupd); and it dies
            # with its supervisor (see follow_parent)
            start_new_session=True,
        )
        threading.Thread(target=self._read_output, args=(self.process,), daemon=True).start()
        deadline = time.monotonic() + timeout
        with self._lines_changed:
            while not all(kind in self.addresses for kind in self.ready):
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.program} exited {self.process.returncode}:\n{self.output}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise TimeoutError(f"{self.program} did not start in {timeout}s:\n{self.output}")
                self._lines_changed.wait(min(remaining, 0.2))
        return self

    def _read_output(self, process: subprocess.Popen) -> None:
        log_file = open(self.log_path, "a") if self.log_path else None
        for line in process.stdout:
            if log_file is not None:
                log_file.write(line)
                log_file.flush()
            with self._lines_changed:
                self.log_lines.append(line.rstrip("\n"))
                match = _LISTENING.search(line)
                if match:
                    self.addresses[match.group(1)] = match.group(2)
                self._lines_changed.notify_all()
        if log_file is not None:
            log_file.close()

    def wait_for_log(self, pattern: str, timeout: float = 10.0) -> str:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._lines_changed:
            while True:
                for line in list(self.log_lines):
                    if regex.search(line):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no log line matching {pattern!r}:\n{self.output}")
                self._lines_changed.wait(min(remaining, 0.2))

    @property
    def output(self) -> str:
        return "\n".join(self.log_lines)

    @property
    def tcp_address(self) -> str:
        return self.addresses["TCP"]

    @property
    def http_address(self) -> str:
        return self.addresses["HTTP"]

    @property
    def tcp_hostport(self) -> tuple[str, int]:
        host, _, port = self.tcp_address.rpartition(":")
        return host, int(port)

    @property
    def http_url(self) -> str:
        return f"http://{self.http_address}"

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in time."""
        process = self.process
        if process is None or process.poll() is not None:
            return process.returncode if process else None
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
            raise TimeoutError(f"{self.program} ignored SIGTERM for {timeout}s:\n{self.output}") from None

    def __enter__(self) -> "DaemonProcess":
        if self.process is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            self.kill()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)


def nsqd_process(data_path: str, *extra: str, wrapper: tuple[str, ...] = (),
                 executable: str | None = None) -> DaemonProcess:
    """An nsqd on ephemeral loopback ports storing into ``data_path``
    (``executable``: see DaemonProcess)."""
    return DaemonProcess("nsqd", [
        "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0", "--https-address=127.0.0.1:0",
        f"--data-path={data_path}", "--broadcast-address=127.0.0.1", *extra,
    ], wrapper=wrapper, executable=executable)


def nsqlookupd_process(*extra: str) -> DaemonProcess:
    """An nsqlookupd on ephemeral loopback ports."""
    return DaemonProcess("nsqlookupd", [
        "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0", "--broadcast-address=127.0.0.1", *extra,
    ])


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, for a program that cannot take port 0
    or must come back on the same one. Chosen below the kernel's ephemeral
    range: a port from that range can be handed to any other socket's
    connect or bind to port 0 before the program binds it. Reserved for a
    while across processes (test workers side by side), so that no other
    caller is given it before the program binds it."""
    low = _ephemeral_low()
    while True:
        port = random.randrange(min(10000, low // 2), low)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        if _reserved(port):
            return port


PORT_RESERVATIONS = os.path.join(tempfile.gettempdir(), "nsqpy-free-ports")
RESERVED_FOR = 1800.0  # seconds: longer than any test keeps ports for a daemon to come back on


def _reserved(port: int) -> bool:
    """True if ``port`` is now this caller's: no other caller was given it
    in the last ``RESERVED_FOR`` seconds (a file per port says when)."""
    path = os.path.join(PORT_RESERVATIONS, str(port))
    try:
        os.makedirs(PORT_RESERVATIONS, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        try:
            if time.time() - os.stat(path).st_mtime < RESERVED_FOR:
                return False
            os.utime(path)  # an old reservation, taken over
            return True
        except FileNotFoundError:
            return False
    except OSError:  # no writable temp dir: the bind check above is all there is
        return True


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; BSDs and macOS start at 49152


class EtcdProcess(DaemonProcess):
    """A one-member etcd (Debian's etcd-server) for replicated nsqd, on
    free loopback ports, storing into ``data_path``."""

    def __init__(self, data_path: str, host: str = "127.0.0.1", client_port: int = 0, peer_port: int = 0,
                 log_path: str | None = None):
        self.client_url = f"http://{host}:{client_port or free_port(host)}"
        peer_url = f"http://{host}:{peer_port or free_port(host)}"
        super().__init__("etcd", [
            "--name=nsqpy", f"--data-dir={data_path}",
            f"--listen-client-urls={self.client_url}", f"--advertise-client-urls={self.client_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=nsqpy={peer_url}", "--logger=zap",  # etcd 3.4's default logger is deprecated
        ], ready=(), executable="etcd", log_path=log_path)

    def start(self, timeout: float = 15.0) -> "EtcdProcess":
        if shutil.which("etcd") is None:
            raise RuntimeError("etcd not found: replicated nsqd needs etcd (Debian's etcd-server; "
                               "`make test` installs it)")
        super().start(timeout)
        self.wait_for_log("serving client traffic", timeout)
        return self


def _keep_ports(daemon: DaemonProcess) -> None:
    """A daemon started again listens where it listened (a replicated
    nsqd's name is its address), ephemeral ports included."""
    bound = {"--tcp-address=": daemon.tcp_address, "--http-address=": daemon.http_address}
    daemon.args = [next((flag + bound[flag] for flag in bound if arg.startswith(flag)), arg) for arg in daemon.args]


def replication_secret(folder: str) -> str:
    """A file in ``folder`` holding a replicated cluster's secret (made
    once, readable by its owner only): every nsqd of the cluster is
    given it, and nobody who can only read etcd has it. -> its path."""
    path = os.path.join(folder, "replication.secret")
    if not os.path.exists(path):
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(32) + "\n")
    return path


class LocalCluster:
    """nsqlookupd plus ``nsqd_count`` nsqd registered with it, on one machine,
    and (with ``nsqadmin``) nsqadmin over them.

    Fixed ports follow NSQ's defaults: nsqlookupd 4160/4161, nsqd number i on
    4150+1000*i (TCP) and 4151+1000*i (HTTP), nsqadmin 4171. With
    ``ephemeral_ports`` every listener takes a free port instead.

    With ``replication_factor`` above 1, an etcd (2379/2380, etcd's own
    defaults) starts first and every nsqd replicates through it, each with
    its own --node-id and the cluster's secret from a file in the data
    path (``replication_secret``).
    """

    def __init__(self, nsqd_count: int, data_path: str, *, host: str = "127.0.0.1",
                 ephemeral_ports: bool = False, nsqd_args: tuple[str, ...] = (), nsqadmin: bool = False,
                 replication_factor: int = 1):
        self.data_path = data_path
        self.host = host
        self.ephemeral_ports = ephemeral_ports
        self.nsqd_count = nsqd_count
        self.nsqd_args = nsqd_args
        self.with_nsqadmin = nsqadmin
        self.replication_factor = replication_factor
        self.etcd: EtcdProcess | None = None
        self.lookupd: DaemonProcess | None = None
        self.nsqds: list[DaemonProcess] = []
        self.nsqadmin: DaemonProcess | None = None

    def _port(self, port: int) -> int:
        return 0 if self.ephemeral_ports else port

    @property
    def processes(self) -> list[DaemonProcess]:
        """In start order; stop() goes backwards (nsqadmin, the nsqd, nsqlookupd, etcd)."""
        return (([self.etcd] if self.etcd else []) + ([self.lookupd] if self.lookupd else []) + self.nsqds
                + ([self.nsqadmin] if self.nsqadmin else []))

    def start(self) -> "LocalCluster":
        os.makedirs(self.data_path, exist_ok=True)
        host = self.host
        replication: tuple[str, ...] = ()
        try:
            if self.replication_factor > 1:
                self.etcd = EtcdProcess(os.path.join(self.data_path, "etcd"), host,
                                        self._port(2379) or free_port(host), self._port(2380) or free_port(host),
                                        log_path=os.path.join(self.data_path, "etcd.log")).start()
                replication = (f"--replication-factor={self.replication_factor}",
                               f"--etcd-endpoint={self.etcd.client_url}",
                               f"--replication-secret-file={replication_secret(self.data_path)}")
            self.lookupd = DaemonProcess("nsqlookupd", [
                f"--tcp-address={host}:{self._port(4160)}", f"--http-address={host}:{self._port(4161)}",
                f"--broadcast-address={host}",
            ], log_path=os.path.join(self.data_path, "nsqlookupd.log")).start()
            for i in range(self.nsqd_count):
                path = os.path.join(self.data_path, f"nsqd{i}")
                os.makedirs(path, exist_ok=True)
                self.nsqds.append(DaemonProcess("nsqd", [
                    f"--tcp-address={host}:{self._port(4150 + 1000 * i)}",
                    f"--http-address={host}:{self._port(4151 + 1000 * i)}",
                    f"--data-path={path}", f"--broadcast-address={host}",
                    f"--lookupd-tcp-address={self.lookupd.tcp_address}",
                    *((f"--node-id={i + 1}", *replication) if replication else ()), *self.nsqd_args,
                ], log_path=os.path.join(self.data_path, f"nsqd{i}.log")).start())
                _keep_ports(self.nsqds[-1])
            if self.with_nsqadmin:
                self.nsqadmin = DaemonProcess("nsqadmin", [
                    f"--http-address={host}:{self._port(4171)}",
                    f"--lookupd-http-address={self.lookupd.http_address}",
                ], ready=("HTTP",), log_path=os.path.join(self.data_path, "nsqadmin.log")).start()
        except BaseException:
            self.stop()
            raise
        return self

    def status_lines(self) -> list[str]:
        lines = []
        if self.etcd is not None:
            lines.append(f"{'etcd':<11} pid {self.etcd.process.pid:<7} {'':<25} "
                         f"URL  {self.etcd.client_url:<28} log {self.etcd.log_path}")
        for name, daemon in [("nsqlookupd", self.lookupd)] + [(f"nsqd{i}", d) for i, d in enumerate(self.nsqds)]:
            lines.append(f"{name:<11} pid {daemon.process.pid:<7} TCP {daemon.tcp_address:<21} "
                         f"HTTP {daemon.http_url:<28} log {daemon.log_path}")
        if self.nsqadmin is not None:
            lines.append(f"{'nsqadmin':<11} pid {self.nsqadmin.process.pid:<7} {'':<25} "
                         f"HTTP {self.nsqadmin.http_url + '/':<28} log {self.nsqadmin.log_path}")
        return lines

    def exited(self) -> DaemonProcess | None:
        """A daemon other than an nsqd that exited by itself, if any (an
        nsqd may die and the cluster go on: see ``nsqpy cluster``)."""
        for daemon in self.processes:
            if daemon not in self.nsqds and daemon.process.poll() is not None:
                return daemon
        return None

    def stop(self) -> None:
        """nsqd first (they persist and unregister), then nsqlookupd."""
        for daemon in reversed(self.processes):
            try:
                daemon.stop()
            except TimeoutError:
                pass
            finally:
                daemon.kill()
