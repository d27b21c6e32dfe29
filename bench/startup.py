"""Time from exec to the listening lines and to the first answered /ping, ours next to NSQ's Go daemons.

    python bench/startup.py [--runs 20] [--stress] [--no-bytecode] [--only nsqd] [--reference DIR]

A test suite that starts a daemon per test pays this time on every test, and
its hooks give the daemon a few seconds to answer ``/ping``, so it is a
figure users feel, most of all on a busy machine. Each run starts the daemon
on ephemeral loopback ports (nsqd in a fresh data directory) and takes two
times from exec: the ``TCP: listening on`` line, and the ``200 OK`` of a
``/ping`` sent once the ``HTTP: listening on`` line is out. The HTTP socket
is bound before any listening line, so that request waits in the kernel's
backlog and is answered the moment the API is: the first /ping a client
polling from exec could get. Then the daemon is stopped.

Ours runs as users start it: the installed console script (``.venv/bin/nsqd``)
and ``python -m nsqpy.cli.nsqd``. Go's daemons come from ``--reference`` and
show "absent" when they are not there. The launchers alternate run by run,
so all see the same machine load; the table gives p50, p95 and max.
``--stress`` runs ``stress-ng --cpu 2`` beside them, as a busy CI machine.

Ours is timed from cached bytecode, as an installed package runs: the runs
clear ``PYTHONDONTWRITEBYTECODE`` and a first, untimed run of each launcher
writes the cache. ``--no-bytecode`` times what a source checkout without
``__pycache__`` pays where ``PYTHONDONTWRITEBYTECODE`` is set (an editable
install writes no bytecode): every start compiles nsqpy's modules, run from
a copy of the package without its caches.
"""

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import nsqpy
from nsqpy.localcluster import DaemonProcess

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "reference",
                         "nsq-v1.3.0", "bin")
PROGRAMS = ("nsqd", "nsqlookupd")
LAUNCHERS = ("script", "-m", "go")


def executable(launcher: str, program: str, reference: str) -> str | None:
    """The program a launcher runs; None for ``python -m``; "" when Go's binary is absent."""
    if launcher == "-m":
        return None
    folder = reference if launcher == "go" else os.path.dirname(sys.executable)
    path = os.path.join(folder, program)
    return path if os.access(path, os.X_OK) else ""


@contextlib.contextmanager
def python_env(no_bytecode: bool):
    """The environment our daemons run in: with nsqpy's bytecode cached, or
    (``no_bytecode``) from a copy of the package without it, never written."""
    if not no_bytecode:
        # an empty PYTHONDONTWRITEBYTECODE counts as unset: bytecode is cached as by an install
        yield {"PYTHONDONTWRITEBYTECODE": ""}
        return
    with tempfile.TemporaryDirectory() as folder:
        shutil.copytree(os.path.dirname(nsqpy.__file__), os.path.join(folder, "nsqpy"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        yield {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": folder}


def daemon(program: str, program_path: str | None, data_path: str, env: dict) -> DaemonProcess:
    """``program`` on ephemeral ports, ready once its TCP listening line is out."""
    args = ["--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0"]
    if program == "nsqd":
        args.append(f"--data-path={data_path}")
    return DaemonProcess(program, args, ready=("TCP",), executable=program_path, env=env)


def time_start(process: DaemonProcess) -> tuple[float, float]:
    """Seconds from exec to the TCP listening line, and to the first answered /ping."""
    started = time.perf_counter()
    with process.start(timeout=30):
        listening = time.perf_counter() - started
        process.wait_for_log("HTTP: listening on", timeout=30)
        with urllib.request.urlopen(f"{process.http_url}/ping", timeout=30) as response:
            response.read()
        return listening, time.perf_counter() - started


@contextlib.contextmanager
def cpu_stress(enabled: bool):
    """``stress-ng --cpu 2`` for the duration, when ``enabled``."""
    if not enabled:
        yield
        return
    stress = subprocess.Popen(["stress-ng", "--cpu", "2", "--quiet"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(1)  # its workers are spinning before the first timed start
        yield
    finally:
        stress.terminate()
        stress.wait(10)


def measure(programs: list[str], runs: int, reference: str,
            env: dict) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(program, launcher) -> a (listening, ping) pair of seconds per run."""
    timings: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for run in range(runs + 1):  # run 0 warms the bytecode and page caches
        for program in programs:
            for launcher in LAUNCHERS:
                program_path = executable(launcher, program, reference)
                if program_path == "":
                    continue
                with tempfile.TemporaryDirectory() as data_path:
                    pair = time_start(daemon(program, program_path, data_path, env))
                if run:
                    timings.setdefault((program, launcher), []).append(pair)
    return timings


def spread(seconds: list[float]) -> str:
    """p50, p95 and max, in milliseconds."""
    ms = sorted(value * 1000 for value in seconds)
    p95 = statistics.quantiles(ms, n=20, method="inclusive")[18] if len(ms) > 1 else ms[0]
    return f"{statistics.median(ms):7.1f} {p95:7.1f} {ms[-1]:7.1f}"


def print_table(programs: list[str], timings: dict, runs: int, conditions: str) -> None:
    print(f"exec to TCP listening line, and to the first /ping answered; {runs} runs each, {conditions} (ms)")
    print(f"{'daemon':<11} {'launcher':<8} {'listen p50':>10} {'p95':>7} {'max':>7} {'ping p50':>10} "
          f"{'p95':>7} {'max':>7}")
    for program in programs:
        for launcher in LAUNCHERS:
            pairs = timings.get((program, launcher))
            if pairs is None:
                print(f"{program:<11} {launcher:<8} {'absent':>10}")
                continue
            listening, ping = zip(*pairs)
            print(f"{program:<11} {launcher:<8}    {spread(listening)}    {spread(ping)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=PROGRAMS, help="time this daemon alone (default both)")
    parser.add_argument("--runs", type=int, default=20, help="runs per daemon and launcher (default 20)")
    parser.add_argument("--stress", action="store_true", help="run stress-ng --cpu 2 beside the daemons")
    parser.add_argument("--no-bytecode", action="store_true", help="run ours without nsqpy's cached bytecode")
    parser.add_argument("--reference", default=REFERENCE, help="folder of NSQ's Go binaries")
    args = parser.parse_args()
    programs = [args.only] if args.only else list(PROGRAMS)
    with python_env(args.no_bytecode) as env, cpu_stress(args.stress):
        timings = measure(programs, args.runs, args.reference, env)
    conditions = ("with stress-ng --cpu 2" if args.stress else "quiet") + (", no bytecode" if args.no_bytecode else "")
    print_table(programs, timings, args.runs, conditions)


if __name__ == "__main__":
    main()
