"""A command run in its own process group, for tests that start programs
with children of their own (Spark's JVM and its Python workers): a signal to
the group reaches all of them, and nothing outlives the test."""

import os
import re
import signal
import subprocess
import threading
import time

#: a daemon's line in ``nsqpy cluster``'s status: name, pid, TCP address (nsqadmin has none), HTTP URL
CLUSTER_STATUS = re.compile(r"^(\S+)\s+pid (\d+)\s+(?:TCP (\S+)\s+)?HTTP (\S+)", re.M)


def cluster_daemons(output: str) -> dict[str, dict]:
    """The daemons ``nsqpy cluster`` says it started, by name: pid, tcp,
    and http (its URL without a trailing slash)."""
    return {match.group(1): {"pid": int(match.group(2)), "tcp": match.group(3), "http": match.group(4).rstrip("/")}
            for match in CLUSTER_STATUS.finditer(output)}


class GroupProcess:
    def __init__(self, command: list[str], env: dict | None = None):
        self.lines: list[str] = []
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, **(env or {})}, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, test, timeout: float = 60.0):
        """The first result of ``test`` (a regex, or a function of a line) that
        is true for an output line; AssertionError with the output if the
        process exits or ``timeout`` passes first."""
        check = (lambda line: re.search(test, line)) if isinstance(test, str) else test
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            lines = self.lines[seen:]
            seen += len(lines)
            for line in lines:
                found = check(line)
                if found:
                    return found
            if self.process.poll() is not None and seen == len(self.lines):
                raise AssertionError(f"exited with {self.process.returncode} first:\n{self.output[-6000:]}")
            time.sleep(0.05)
        raise AssertionError(f"nothing matched in {timeout}s:\n{self.output[-6000:]}")

    def signal(self, number: int) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, number)

    def wait(self, timeout: float) -> int:
        """The exit code, once the process ended and its output is all read."""
        self.process.wait(timeout)
        self._reader.join(10)
        return self.process.returncode

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM to the group, SIGKILL if it lingers."""
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.process.wait(10)
