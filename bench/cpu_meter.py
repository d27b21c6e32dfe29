"""CPU seconds per kind of process over a span of time, read from /proc (Linux).

Some benchmarks' work runs in processes they did not start and that come
and go: Spark's JVM, the Python streaming source runner that lives as long
as its query, Python workers that exit when idle. Reading each process at
the start and at the end of a span misses those that ended in between. So a
thread reads the CPU count of every process of a kind it knows every
``interval`` seconds and keeps each one's last reading: a process that exits
loses at most its last interval.
"""

import os
import threading
from pathlib import Path

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds one process has spent so far."""
    return sum(cpu_times(pid))


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds one process has spent so far."""
    return _times_in(Path(f"/proc/{pid}/stat").read_text())


def _times_in(stat: str) -> tuple[float, float]:
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS_PER_SECOND, int(fields[12]) / TICKS_PER_SECOND


class CPUMeter:
    """``kinds``: (label, text found in a process's command line); the first
    match names the process, and processes matching none are not read."""

    def __init__(self, kinds: list[tuple[str, str]], interval: float = 0.1):
        self.kinds = kinds
        self.interval = interval
        # a command line is read once per process and program: a script that
        # execs its program (spark-submit its JVM) keeps its pid
        self._kind_of: dict[tuple[int, str], str | None] = {}
        self._last: dict[int, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, name="cpu-meter", daemon=True)

    def __enter__(self) -> "CPUMeter":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def reading(self) -> dict[int, tuple[str, float]]:
        """Each process's kind and CPU seconds, read now (and the last
        reading of those that have exited)."""
        with self._lock:
            self._scan()
            return dict(self._last)

    @staticmethod
    def spent(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
        """CPU seconds per kind between two readings."""
        spent: dict[str, float] = {}
        for pid, (kind, seconds) in after.items():
            spent[kind] = spent.get(kind, 0.0) + seconds - before.get(pid, (kind, 0.0))[1]
        return spent

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:  # one scan at a time: a later reading never gives way to an earlier one
                self._scan()

    def _scan(self) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                program = (pid, stat[stat.index("(") + 1:stat.rindex(")")])
                kind = self._kind_of[program] if program in self._kind_of else self._classify(program)
                if kind is not None:
                    self._last[pid] = (kind, sum(_times_in(stat)))
            except OSError:  # exited meanwhile
                continue

    def _classify(self, program: tuple[int, str]) -> str | None:
        command = Path(f"/proc/{program[0]}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        kind = next((label for label, text in self.kinds if text in command), None)
        self._kind_of[program] = kind
        return kind
