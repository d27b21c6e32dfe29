"""Time from exec to the listening lines, ours next to NSQ's Go daemons.

    python bench/startup.py [--runs 15] [--reference ../shared/reference/nsq-v1.3.0/bin]

A test suite that starts a daemon per test pays this time on every test, so
it is a figure users feel. Each run starts the daemon on ephemeral loopback
ports (nsqd in a fresh data directory), reads its log until both the
``TCP: listening on`` and the ``HTTP: listening on`` lines are out, then
stops it. Ours and Go's alternate run by run, so both see the same machine
load; the table gives the median and the spread of the runs. Go's daemons
come from ``--reference`` and show "absent" when they are not there.

Ours is timed as an installed package runs: from cached bytecode. The runs
clear ``PYTHONDONTWRITEBYTECODE`` and a first, untimed run of each daemon
writes the cache (without it every start compiles nsqpy's modules from
source, some 30 ms more).
"""

import argparse
import os
import statistics
import tempfile
import time

from nsqpy.localcluster import DaemonProcess

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "reference",
                         "nsq-v1.3.0", "bin")
DAEMONS = ("nsqd", "nsqlookupd")


def daemon(impl: str, program: str, reference: str, data_path: str) -> DaemonProcess | None:
    """``program`` (``ours`` or ``go``) on ephemeral ports; None when Go's binary is absent."""
    args = ["--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0"]
    if program == "nsqd":
        args.append(f"--data-path={data_path}")
    executable = None
    if impl == "go":
        executable = os.path.join(reference, program)
        if not os.access(executable, os.X_OK):
            return None
    # an empty PYTHONDONTWRITEBYTECODE counts as unset: bytecode is cached as by an install
    return DaemonProcess(program, args, executable=executable, env={"PYTHONDONTWRITEBYTECODE": ""})


def time_to_listening(process: DaemonProcess) -> float:
    """Seconds from exec until the TCP and HTTP listening lines are both out."""
    started = time.perf_counter()
    with process.start(timeout=20):
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per daemon and implementation (default 15)")
    parser.add_argument("--reference", default=REFERENCE, help="folder of NSQ's Go binaries")
    args = parser.parse_args()
    timings: dict[tuple[str, str], list[float]] = {}
    for run in range(args.runs + 1):  # run 0 warms the bytecode and page caches
        for program in DAEMONS:
            for impl in ("ours", "go"):
                with tempfile.TemporaryDirectory() as data_path:
                    process = daemon(impl, program, args.reference, data_path)
                    if process is None:
                        continue
                    elapsed = time_to_listening(process) * 1000
                    if run:
                        timings.setdefault((program, impl), []).append(elapsed)
    print(f"exec to TCP+HTTP listening lines, {args.runs} runs each (ms)")
    print(f"{'daemon':<11} {'impl':<5} {'median':>7} {'min':>7} {'max':>7}")
    for program in DAEMONS:
        for impl in ("ours", "go"):
            runs = timings.get((program, impl))
            if runs is None:
                print(f"{program:<11} {impl:<5} {'absent':>7}")
                continue
            print(f"{program:<11} {impl:<5} {statistics.median(runs):7.1f} {min(runs):7.1f} {max(runs):7.1f}")


if __name__ == "__main__":
    main()
