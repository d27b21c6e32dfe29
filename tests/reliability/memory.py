"""A process's resident memory, open descriptors and CPU time, read from /proc."""

import os
import urllib.request


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settled_rss_kb(daemon) -> int:
    """The daemon's RSS once it is fully up: its HTTP API answers. (The
    daemons print their listening lines before loading the HTTP stack, so
    right after start the memory that import takes is still to come.)"""
    urllib.request.urlopen(f"{daemon.http_url}/ping", timeout=10).read()
    return rss_kb(daemon.process.pid)
