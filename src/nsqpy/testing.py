"""Run nsqpy daemons as real subprocesses on loopback, for tests and benchmarks.

A daemon is started with port 0 listeners and a temp data dir; its
``TCP: listening on`` / ``HTTP: listening on`` log lines tell where it is.
``stop()`` always leaves no process behind (SIGTERM, then SIGKILL).
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

_LISTENING = re.compile(r"(TCP|HTTP|HTTPS): listening on (\S+)")


class DaemonProcess:
    def __init__(self, program: str, args: list[str], *, ready: tuple[str, ...] = ("TCP", "HTTP"),
                 env: dict | None = None):
        self.program = program
        self.args = list(args)
        self.ready = ready
        self.env = env
        self.addresses: dict[str, str] = {}
        self.log_lines: list[str] = []
        self.process: subprocess.Popen | None = None
        self._lines_changed = threading.Condition()

    @property
    def command(self) -> list[str]:
        return [sys.executable, "-m", f"nsqpy.cli.{self.program}", *self.args]

    def start(self, timeout: float = 15.0) -> "DaemonProcess":
        self.addresses = {}
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env={**os.environ, **(self.env or {})}, text=True, errors="replace",
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
        for line in process.stdout:
            with self._lines_changed:
                self.log_lines.append(line.rstrip("\n"))
                match = _LISTENING.search(line)
                if match:
                    self.addresses[match.group(1)] = match.group(2)
                self._lines_changed.notify_all()

    def wait_for_log(self, pattern: str, timeout: float = 10.0) -> str:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._lines_changed:
            while True:
                for line in self.log_lines:
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


def nsqd_process(data_path: str, *extra: str) -> DaemonProcess:
    """An nsqd on ephemeral loopback ports storing into ``data_path``."""
    return DaemonProcess("nsqd", [
        "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0",
        f"--data-path={data_path}", "--broadcast-address=127.0.0.1", *extra,
    ])


def nsqlookupd_process(*extra: str) -> DaemonProcess:
    """An nsqlookupd on ephemeral loopback ports."""
    return DaemonProcess("nsqlookupd", [
        "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0", "--broadcast-address=127.0.0.1", *extra,
    ])
