"""The graceful stop's two files: the request the source looks for, and its report.

The source runs in Spark's reader process, the caller of ``stop_gracefully``
in the driver, and they share no channel but the file system: the caller
writes ``<drain>``; the source, at its next read (every committed batch
FINished by then), stops its consumer and writes ``<drain>.done`` saying
how many messages it gave back and how many acknowledgements nsqd did not
confirm (those messages may be delivered again).
"""

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Drain:
    """How a graceful stop went. True when every acknowledgement is confirmed."""
    confirmed: bool  # the source answered the request (or the query had ended by itself)
    released: int = 0  # received, never archived: nsqd delivers them again (no copy)
    unconfirmed: int = 0  # archived, FIN not confirmed by nsqd: may be archived again

    def __bool__(self) -> bool:
        return self.confirmed and not self.unconfirmed


def report_path(drain_file: str) -> str:
    return drain_file + ".done"


def clear(drain_file: str) -> None:
    """Forget a previous run's request and report."""
    for stale in (drain_file, report_path(drain_file)):
        if os.path.exists(stale):
            os.unlink(stale)


def request(drain_file: str) -> None:
    with open(drain_file, "w") as marker:
        marker.write("stop\n")


def write_report(drain_file: str, released: int, unconfirmed: int) -> None:
    """Written whole under a temporary name, so a reader never sees half of it."""
    partial = report_path(drain_file) + ".tmp"
    with open(partial, "w") as report:
        report.write(f"released {released}\nunconfirmed {unconfirmed}\n")
    os.replace(partial, report_path(drain_file))


def read_report(drain_file: str) -> Drain | None:
    """The source's report, or None while there is none."""
    try:
        with open(report_path(drain_file)) as report:
            fields = dict(line.split() for line in report if line.strip())
    except FileNotFoundError:
        return None
    return Drain(confirmed=True, released=int(fields["released"]), unconfirmed=int(fields["unconfirmed"]))


def stop_reading(drain_file: str) -> bool:
    """For a source that holds nothing between batches (the executors and
    log readers): whether a graceful stop is requested; if so it is answered
    at once, nothing given back and nothing to come again."""
    if not drain_file or not os.path.exists(drain_file):
        return False
    if read_report(drain_file) is None:
        write_report(drain_file, released=0, unconfirmed=0)
    return True
