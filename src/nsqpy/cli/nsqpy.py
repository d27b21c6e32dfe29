"""``nsqpy``: commands that are nsqpy's own rather than NSQ's.

``nsqpy cluster [--nsqd N] [--replication-factor R]`` runs nsqlookupd, N
nsqd registered with it and nsqadmin over them (and etcd, replicated) in
the foreground, prints where each is, and stops them all on Ctrl-C,
SIGTERM or SIGHUP (the terminal closed); if it is killed outright, the
daemons get SIGTERM from the kernel (see ``localcluster``). An nsqd that
dies leaves the others running, so that what a cluster does then (a
survivor taking a replicated node's messages over) can be watched;
``--restart`` starts it again.

``nsqpy spark-connect-server`` runs a Spark Connect server from the pyspark
install whose Python workers are this Python, so they import nsqpy (the
``nsq`` source and sink run there): what ``spark-submit --class
...SparkConnectServer`` does, without the environment it needs by hand,
and logging at WARN (nsqpy/spark/connect_server_log4j2.properties), as
Spark's INFO is a hundred lines and more for each client's query.
"""

import argparse
import os
import signal
import sys
import time
from importlib import resources

from ..localcluster import LocalCluster
from ..version import nsqpy_version_line
from .flags import GoDefaultsFormatter


class _Stop(Exception):
    pass


def _raise_stop(signum, frame):
    raise _Stop()


def cluster(args) -> int:
    nodes = LocalCluster(args.nsqd, args.data_path, host=args.host, ephemeral_ports=args.ephemeral_ports,
                         nsqd_args=tuple(args.nsqd_arg), nsqadmin=not args.no_nsqadmin,
                         replication_factor=args.replication_factor)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, _raise_stop)
    try:
        try:
            nodes.start()
        except (RuntimeError, TimeoutError) as error:
            print(f"nsqpy cluster: {error}", file=sys.stderr)
            return 1
        for line in nodes.status_lines():
            print(line, flush=True)
        admin = f"; nsqadmin at {nodes.nsqadmin.http_url}/" if nodes.nsqadmin else ""
        print(f"cluster up: consumers use --lookupd-http-address={nodes.lookupd.http_address}{admin}; "
              "Ctrl-C stops it", flush=True)
        gone: set[int] = set()  # nsqd (by index) that exited and were said so
        while True:
            dead = nodes.exited()
            if dead is not None:
                print(f"nsqpy cluster: {dead.program} exited with {dead.process.returncode}; stopping the "
                      f"others. Its last lines:\n" + "\n".join(list(dead.log_lines)[-10:]), file=sys.stderr)
                return 1
            for index, nsqd in enumerate(nodes.nsqds):
                if nsqd.process.poll() is None or index in gone:
                    continue
                gone.add(index)
                print(f"nsqpy cluster: nsqd{index} exited with {nsqd.process.returncode}; the others keep "
                      f"running ({_what_follows(args)})", file=sys.stderr, flush=True)
                if args.restart:
                    try:
                        nsqd.start()
                    except (RuntimeError, TimeoutError) as error:
                        print(f"nsqpy cluster: nsqd{index} did not start again: {error}", file=sys.stderr)
                        continue
                    gone.discard(index)
                    print(f"nsqpy cluster: nsqd{index} started again, pid {nsqd.process.pid}", flush=True)
            if len(gone) == len(nodes.nsqds):
                print("nsqpy cluster: every nsqd exited; stopping the others", file=sys.stderr)
                return 1
            time.sleep(0.5)
    except _Stop:
        print("stopping cluster", flush=True)
        return 0
    finally:
        for number in (signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_IGN)  # let the shutdown finish
        nodes.stop()
        if nodes.processes:
            print("cluster stopped", flush=True)


def _what_follows(args) -> str:
    restart = "it starts again now" if args.restart else "nsqpy cluster --restart starts a dead nsqd again"
    if args.replication_factor > 1:
        return f"a survivor delivers the messages it held; {restart}"
    return f"its messages wait in its data dir; {restart}"


CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: warnings, errors and the address it listens on (Spark logs at INFO by default)
CONNECT_SERVER_LOG_CONFIG = "connect_server_log4j2.properties"


def spark_connect_server(args) -> int:
    """Replaced by spark-submit (Ctrl-C and signals reach it directly)."""
    try:
        import pyspark
    except ImportError:
        print("nsqpy spark-connect-server: needs the Spark extra: pip install 'nsqpy[spark]'", file=sys.stderr)
        return 1
    spark_home = os.path.dirname(pyspark.__file__)
    command = [os.path.join(spark_home, "bin", "spark-submit"), "--class", CONNECT_SERVER_CLASS,
               "--master", args.master, "--conf", f"spark.connect.grpc.binding.address={args.host}",
               "--conf", f"spark.connect.grpc.binding.port={args.port}"]
    for setting in args.conf:
        command += ["--conf", setting]
    env = {**os.environ, "SPARK_HOME": spark_home, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.setdefault("SPARK_LOCAL_IP", args.host)
    env.setdefault("LOG4J_CONFIGURATION_FILE", str(resources.files("nsqpy") / "spark" / CONNECT_SERVER_LOG_CONFIG))
    os.execve(command[0], command, env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nsqpy", description="nsqpy's own commands",
                                     formatter_class=GoDefaultsFormatter)
    parser.add_argument("--version", action="version", version=nsqpy_version_line("nsqpy"))
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("cluster", help="run nsqlookupd, N nsqd registered with it and nsqadmin, "
                                              "in the foreground", formatter_class=GoDefaultsFormatter)
    run.add_argument("--nsqd", type=int, default=1, help="how many nsqd nodes")
    run.add_argument("--data-path", default=".data", help="where each node keeps its data and log")
    run.add_argument("--host", default="127.0.0.1", help="address to listen on and broadcast")
    run.add_argument("--ephemeral-ports", action="store_true",
                     help="free ports instead of 4160/4161 and 4150+1000*i/4151+1000*i")
    run.add_argument("--nsqd-arg", action="append", default=[], metavar="FLAG",
                     help="extra flag for every nsqd, e.g. --nsqd-arg=--mem-queue-size=1000 (repeatable)")
    run.add_argument("--no-nsqadmin", action="store_true", help="do not start nsqadmin (it listens on port 4171)")
    run.add_argument("--replication-factor", type=int, default=1,
                     help="2 or 3: start etcd too, and every nsqd replicates each message to that many nodes")
    run.add_argument("--restart", action="store_true", help="start an nsqd that exits again, on the same ports")
    connect = commands.add_parser("spark-connect-server", help="run a Spark Connect server whose Python "
                                  "workers can run nsqpy's source and sink", formatter_class=GoDefaultsFormatter)
    connect.add_argument("--master", default="local[*]", help="Spark master the server runs its jobs on")
    connect.add_argument("--host", default="127.0.0.1", help="address the server listens on")
    connect.add_argument("--port", type=int, default=15002, help="port clients reach as sc://host:port "
                                                                 "(0: one the system picks, printed at start)")
    connect.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                         help="Spark setting for the server (repeatable)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "spark-connect-server":
        return spark_connect_server(args)
    if args.nsqd < 1:
        parser.error("--nsqd must be at least 1")
    if args.replication_factor not in (1, 2, 3):
        parser.error("--replication-factor must be 1, 2 or 3")
    if args.replication_factor > args.nsqd:
        parser.error(f"--replication-factor {args.replication_factor} needs at least as many nsqd (--nsqd)")
    return cluster(args)


if __name__ == "__main__":
    sys.exit(main())
