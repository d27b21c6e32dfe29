"""What is checked before Spark runs anything: the nodes answer, the paths take files.

Starting Spark's JVM costs seconds, and a query that fails inside it ends in
a long Java and Python traceback. So ``nsq_to_parquet`` (before it starts
Spark) and the source's ``load()`` (before a query starts) reach every node
once and fail in one line that names it. A node that answers here may still
go down later; the running query then reconnects as any consumer does.
"""

import os
import socket
import urllib.error
import urllib.request

from ..client.discovery import lookup_url
from ..net import split_host_port
from .backlog import http_address_beside
from .options import SourceOptions

_TIMEOUT = 3.0


class Unreachable(Exception):
    """A node that did not answer, or a path that cannot be written; one line."""


def _reason(error: Exception) -> str:
    if isinstance(error, urllib.error.URLError) and not isinstance(error, urllib.error.HTTPError):
        error = error.reason if isinstance(error.reason, Exception) else error
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def _connect(address: str) -> None:
    host, port = split_host_port(address)
    socket.create_connection((host, port), timeout=_TIMEOUT).close()


def _ping(address: str) -> None:
    with urllib.request.urlopen(lookup_url(address, "ping"), timeout=_TIMEOUT) as response:
        response.read()


def reach(options: SourceOptions) -> None:
    """Every nsqd TCP and HTTP address given answers, and at least one
    nsqlookupd does (the consumer works on with the others down)."""
    for address in options.nsqd_tcp_addresses:
        try:
            _connect(address)
        except OSError as error:
            raise Unreachable(f"cannot reach nsqd at {address}: {_reason(error)}") from None
    for address in options.nsqd_http_addresses:
        try:
            _ping(address)
        except OSError as error:
            raise Unreachable(f"cannot reach nsqd's HTTP API at {address}: {_reason(error)}") from None
    if options.reader == "executors" and len(options.nsqd_http_addresses) != len(options.nsqd_tcp_addresses):
        _find_http_apis(options.nsqd_tcp_addresses)
    failures = []
    for address in options.lookupd_http_addresses:
        try:
            _ping(address)
            return
        except OSError as error:
            failures.append(f"{address} ({_reason(error)})")
    if failures:
        raise Unreachable(f"cannot reach nsqlookupd at {', '.join(failures)}")


def _find_http_apis(tcp_addresses) -> None:
    """The executors reader plans each batch from every nsqd's ``/stats``: a
    node whose HTTP API cannot be found would never be read."""
    for address in tcp_addresses:
        if http_address_beside(address) is None:
            raise Unreachable(f"cannot find the HTTP API of nsqd at {address} (not on its TCP port + 1), which "
                              f"reader=executors plans from: give nsqd_http_addresses (--nsqd-http-address), one "
                              f"per nsqd TCP address, in the same order")


def check_writable(what: str, path: str) -> None:
    """Create the directory if need be; it must accept new files."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise Unreachable(f"{what} {path} cannot be created: {error.strerror or error}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise Unreachable(f"{what} {path} is not writable")


def check_spark_home() -> None:
    """A ``SPARK_HOME`` left from another install must hold a Spark:
    PySpark starts ``$SPARK_HOME/bin/spark-submit`` when it is set."""
    home = os.environ.get("SPARK_HOME")
    if home and not os.access(os.path.join(home, "bin", "spark-submit"), os.X_OK):
        raise Unreachable(f"SPARK_HOME={home} has no bin/spark-submit: unset it to run the Spark PySpark "
                          f"installed, or point it at a Spark distribution")
