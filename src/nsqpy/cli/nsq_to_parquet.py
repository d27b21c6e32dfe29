"""``nsq_to_parquet``: archive a topic to Parquet with Spark, partitioned by date and hour.

    nsq_to_parquet --topic=events --lookupd-http-address=127.0.0.1:4161 --output-dir=archive

Runs until Ctrl-C (or, with ``--available-now``, until what the channel held
at start is archived), printing a status line every ``--status-every``
seconds. Ctrl-C stops gracefully: everything archived is acknowledged at
nsqd, and nothing else.

A topic retained on every nsqd (``nsqd --retention``) is read by offset
(the log reader): no channel, nothing acknowledged, exactly once by
construction; ``--starting-offsets`` and ``--starting-timestamp`` say where
a first run starts (the checkpoint says where later ones do; a topic read
through a channel refuses them), ``--max-messages-per-batch`` caps its
batches too, and ``--available-now`` ends at the offsets the logs had at start.

``--available-now`` first waits up to ``--held-wait`` seconds for messages
that other consumers of the channel hold in flight (a stale run, another job
on the same channel); the source counts them in what the run archives, so
those given back while it reads are archived by it. If some are still held
when the run ends, it says how many, held by whom, and exits 3: the archive
is not all the channel held.
"""

import argparse
import logging
import os
import re
import signal
import sys
import threading
import time

from ..version import nsqpy_version_line
from .flags import OneLineErrorParser
from .spark_noise import QuietStderr

# up to 100,000 messages a second with nsqd at its own defaults (the source
# opens as many connections as a batch needs); a quiet topic costs no files
DEFAULT_TRIGGER = "1 second"
DEFAULT_MAX_MESSAGES_PER_BATCH = 100000
EXIT_HELD_ELSEWHERE = 3  # --available-now: messages in flight to other consumers were not archived
_END_POLL = 0.1  # seconds between looks at whether the query has ended
_BAR_EVERY = 0.5  # seconds between redraws of the progress bar on a terminal

# what Spark's processingTime accepts: "10 seconds", "500 milliseconds", "1 minute 30 seconds"
_INTERVAL = re.compile(r"^(?:interval\s+)?(?:\d+(?:\.\d+)?\s*(?:week|day|hour|minute|min|second|sec|millisecond|"
                       r"ms|microsecond|us)s?\s*)+$", re.IGNORECASE)


def trigger_interval(text: str) -> str:
    if not _INTERVAL.match(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not an interval like '10 seconds' or '500 milliseconds'")
    return text.strip()


def parse_args(argv):
    parser = OneLineErrorParser(prog="nsq_to_parquet", description=__doc__.split("\n")[0].split(": ", 1)[1])
    parser.add_argument("--version", action="version", version=nsqpy_version_line("nsq_to_parquet"))
    parser.add_argument("--topic", required=True, help="NSQ topic to archive")
    parser.add_argument("--channel", default="nsq_to_parquet", help="NSQ channel")
    parser.add_argument("--lookupd-http-address", action="append", default=[], metavar="ADDR",
                        help="nsqlookupd HTTP address (repeatable)")
    parser.add_argument("--nsqd-tcp-address", action="append", default=[], metavar="ADDR",
                        help="nsqd TCP address (repeatable)")
    parser.add_argument("--nsqd-http-address", action="append", default=[], metavar="ADDR",
                        help="nsqd HTTP address, for the lag (found through nsqlookupd otherwise)")
    parser.add_argument("--output-dir", required=True, help="where the Parquet files go")
    parser.add_argument("--checkpoint-dir", help="Spark checkpoint (default <output-dir>/_checkpoint); "
                                                 "keep it to resume where the last run stopped")
    parser.add_argument("--master", default="local[*]", help="Spark master, e.g. "
                        "spark://host:7077, or sc://host:15002 for a Spark Connect server")
    parser.add_argument("--trigger", default=DEFAULT_TRIGGER, type=trigger_interval,
                        help="micro-batch interval ('1 second': a batch of up to --max-messages-per-batch "
                             "each second; '0 seconds': as fast as possible)")
    parser.add_argument("--available-now", action="store_true",
                        help="archive what the channel holds now, then exit")
    parser.add_argument("--held-wait", type=float, default=30.0, metavar="SECONDS",
                        help="with --available-now: how long to wait for messages other consumers of the "
                             "channel hold in flight before archiving without them (exit status 3)")
    parser.add_argument("--max-messages-per-batch", type=int, default=DEFAULT_MAX_MESSAGES_PER_BATCH,
                        help="cap on one micro-batch, for every reader (the channel readers open as many "
                             "connections per nsqd as nsqd's --max-rdy-count requires)")
    parser.add_argument("--reader", choices=("auto", "driver", "executors", "log"), default="auto",
                        help="how nsqd is read: 'log' (a retained topic by offset, in the tasks; chosen by 'auto' "
                             "when the topic is retained on every nsqd), else through the channel: 'driver' (one "
                             "consumer in Spark's driver; auto's choice) or 'executors' (each batch split into "
                             "partitions per nsqd, read in parallel by the tasks and logged under the checkpoint, "
                             "which every executor must see)")
    parser.add_argument("--starting-offsets", metavar="WHERE",
                        help="log reader, first run: 'earliest' (the default), 'latest' or JSON of offsets per "
                             "nsqd TCP address")
    parser.add_argument("--starting-timestamp", type=int, metavar="UNIX_MS",
                        help="log reader, first run: start at the first message accepted at this time or later")
    parser.add_argument("--wal", action="store_true",
                        help="keep a write-ahead log under the checkpoint: exact replays after a driver crash")
    parser.add_argument("--status-every", type=float, default=10.0, help="seconds between status lines")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="Spark setting (repeatable), overriding nsqpy's light local defaults")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="nsq source option (repeatable), e.g. msg_timeout=120 or tls_v1=true")
    args = parser.parse_args(argv)
    if not args.lookupd_http_address and not args.nsqd_tcp_address:
        parser.error("give --lookupd-http-address or --nsqd-tcp-address")
    for setting in args.conf + args.option:
        if "=" not in setting:
            parser.error(f"expected KEY=VALUE, got {setting!r}")
    return args


def source_options(args) -> dict:
    options = {
        "topic": args.topic,
        "channel": args.channel,
        "max_messages_per_batch": str(args.max_messages_per_batch),
        "reader": "" if args.reader == "auto" else args.reader,
    }
    if args.starting_offsets is not None:
        options["startingOffsets"] = args.starting_offsets
    if args.starting_timestamp is not None:
        options["startingTimestamp"] = str(args.starting_timestamp)
    for name, values in (("lookupd_http_addresses", args.lookupd_http_address),
                         ("nsqd_tcp_addresses", args.nsqd_tcp_address),
                         ("nsqd_http_addresses", args.nsqd_http_address)):
        if values:
            options[name] = ",".join(values)
    if args.wal or args.reader == "executors":
        options["walPath"] = os.path.join(os.path.abspath(args.checkpoint_dir), "nsq-wal")
    options["client_id"] = run_client_id(args)
    options.update(setting.split("=", 1) for setting in args.option)
    return options


def preflight(args) -> tuple[dict, int]:
    """The source's options, or the exit status of a one-line failure: every
    check that needs no JVM (options, paths, the nodes reached once, which
    reader reads the topic: ``args.chosen_reader``) runs before Spark
    starts, so a mistake costs a second, not a JVM start."""
    try:
        import nsqpy.spark  # noqa: F401 - PySpark and PyArrow present, and recent enough
    except ImportError as error:
        return {}, _fail(str(error), 1)
    from ..spark.logsource import choose_reader, refuse_stream_ends
    from ..spark.options import OptionError, SourceOptions
    from ..spark.preflight import Unreachable, check_spark_home, check_writable, reach
    from ..spark.session import CONNECT_SCHEME

    options = source_options(args)
    try:
        parsed = SourceOptions.parse(options)
    except OptionError as error:
        return {}, _fail(f"{error} (see nsq_to_parquet --help)", 2)
    try:
        args.chosen_reader = choose_reader(parsed)
        if args.chosen_reader == "log":
            refuse_stream_ends(parsed)  # an archive is a stream
    except OptionError as error:
        return {}, _fail(str(error), 1)
    if args.chosen_reader == "log":
        options.pop("walPath", None)  # a log is read again by offset: nothing to keep
        if not parsed.log.starting.offsets:  # an archive starts at the log's start, not Spark's "latest"
            options["startingOffsets"] = "earliest"
    try:
        check_writable("--output-dir", args.output_dir)
        check_writable("--checkpoint-dir", args.checkpoint_dir)
        if args.chosen_reader != "log":
            reach(parsed)
        if not args.master.startswith(CONNECT_SCHEME):
            check_spark_home()
    except Unreachable as error:
        return {}, _fail(str(error), 1)
    return options, 0


def _fail(message: str, status: int) -> int:
    print(f"nsq_to_parquet: {message}", file=sys.stderr, flush=True)
    return status


class _NoInterruptTracebacks(logging.Filter):
    """py4j logs the traceback of a Ctrl-C that lands while it waits for the
    JVM (on the root logger); the one line this command prints says enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and record.exc_info[0] is KeyboardInterrupt)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.getLogger().addFilter(_NoInterruptTracebacks())
    quiet = QuietStderr()
    args.terminal = quiet.terminal()
    try:
        return archive(args)
    finally:
        quiet.restore()


def archive(args) -> int:
    args.output_dir = os.path.abspath(args.output_dir)
    args.checkpoint_dir = os.path.abspath(args.checkpoint_dir or os.path.join(args.output_dir, "_checkpoint"))
    try:
        options, status = preflight(args)
        if status:
            return status
        from ..spark.archive import StatusLine, drain_file, failure_reason, start_archive, stop_gracefully
        from ..spark.session import build_session, end_session

        if args.available_now and args.chosen_reader != "log":
            wait_for_holders(args)
        print(f"nsq_to_parquet: starting Spark (master {args.master})", flush=True)
        spark = start_spark(lambda: build_session(args.master, f"nsq_to_parquet {args.topic}",
                                                  dict(setting.split("=", 1) for setting in args.conf)))
    except KeyboardInterrupt:  # Ctrl-C while Spark starts: nothing read, nothing to stop gracefully
        return _fail("interrupted before archiving began; nothing was read", 130)
    # after the session: SparkContext installs a SIGINT handler that cancels
    # every job at once, and a graceful stop lets the batch in progress commit
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    query = start_archive(spark, options, args.output_dir, args.checkpoint_dir,
                          trigger=args.trigger, available_now=args.available_now)
    print(f"nsq_to_parquet: archiving {what_is_read(args)} to {args.output_dir} (master {args.master})"
          f"{'' if args.available_now else '; Ctrl-C stops'}", flush=True)
    status = StatusLine(options, reader=args.chosen_reader)
    terminal = args.terminal  # a progress bar there, redrawn in place; plain lines otherwise
    every = min(args.status_every, _BAR_EVERY) if terminal else args.status_every
    try:
        next_line = time.monotonic() + every
        while query.isActive and not stop.is_set():
            # in short steps: a run that ends (availableNow) exits at once, not at the next line
            stop.wait(min(_END_POLL, max(0.0, next_line - time.monotonic())))
            if query.isActive and time.monotonic() >= next_line:
                if terminal:
                    print(f"\r{status.bar(query)}\x1b[K", end="", file=terminal, flush=True)
                else:
                    print(status.render(query), flush=True)
                next_line += every
        if terminal:
            print(file=terminal, flush=True)
        if stop.is_set() and query.isActive:
            print("nsq_to_parquet: stopping after the batch in progress", flush=True)
            drained = stop_gracefully(query, drain_file(args.checkpoint_dir))
            if not drained.confirmed:
                print("nsq_to_parquet: the source did not confirm the drain; nsqd redelivers what it held, "
                      "including the last archived batch if it was not acknowledged",
                      file=sys.stderr, flush=True)
            elif drained.unconfirmed:
                print(f"nsq_to_parquet: nsqd did not confirm {drained.unconfirmed} acknowledgements; "
                      "up to that many archived messages will be delivered and archived again",
                      file=sys.stderr, flush=True)
        error = query.exception()
        print(status.render(query), flush=True)
        if error is not None:
            print(f"nsq_to_parquet: the query failed: {failure_reason(error)}", file=sys.stderr, flush=True)
            return 1
        if args.available_now and not stop.is_set() and args.chosen_reader != "log":
            held = holders_now(args)
            if held:
                return _fail(f"{sum(h.in_flight for h in held)} messages of {args.topic}/{args.channel} are in "
                             f"flight to other consumers and not archived by this run: "
                             f"{'; '.join(map(str, held))}", EXIT_HELD_ELSEWHERE)
        print("nsq_to_parquet: stopped", flush=True)
        return 0
    finally:
        end_session(spark)


def what_is_read(args) -> str:
    """The first status line's account of the source and its reader."""
    if args.chosen_reader == "log":
        start = (f"from {args.starting_timestamp} ms" if args.starting_timestamp is not None
                 else f"from {args.starting_offsets or 'earliest'}")
        return (f"{'what the log holds now of ' if args.available_now else ''}{args.topic} with the log reader "
                f"(retained on every nsqd; read by offset, {start} on a first run)")
    return (f"{'what is queued in ' if args.available_now else ''}{args.topic}/{args.channel} with the "
            f"{args.chosen_reader} reader (through the channel)")


def start_spark(build):
    """``build()``'s session, built in a thread of its own, so that a Ctrl-C
    while Spark starts lands in the main thread's wait and nowhere else.
    Raised inside PySpark's start (in a py4j call, in the SIGINT handler
    PySpark installs, which calls the JVM, or in its clean-up after a failed
    start) it could leave this process waiting on the JVM for good. On
    Ctrl-C the thread is left behind: the process exits, and the JVM exits
    when its standard input, this process's pipe, closes. PySpark installs
    its SIGINT handler only from the main thread, so the command's own
    handler is the only one. The thread blocks SIGINT: PySpark starts the
    JVM with a ``preexec_fn``, so the child runs Python code between fork
    and exec, and a Ctrl-C in that window printed a KeyboardInterrupt
    traceback from the child. A child inherits the blocked signal, and
    PySpark's ``preexec_fn`` then ignores it, as it meant to."""
    built: dict = {}
    done = threading.Event()

    def run() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            built["session"] = build()
        except BaseException as error:  # re-raised in the main thread, with its traceback
            built["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, name="nsqpy-spark-start", daemon=True).start()
    done.wait()
    if "error" in built:
        raise built["error"]
    return built["session"]


def holders_now(args) -> list:
    """Other consumers of the channel holding messages: this run's own
    connections (its ``client_id``) may still be closing when it ends."""
    from ..spark.backlog import find_http_addresses, holders

    addresses = find_http_addresses(args.nsqd_http_address, args.lookupd_http_address, args.nsqd_tcp_address,
                                    args.topic)
    return holders(addresses, args.topic, args.channel, other_than=run_client_id(args))


def run_client_id(args) -> str:
    """The client_id this run's connections give nsqd: ``--option
    client_id=...``, or one naming the command and its process."""
    given = [setting.split("=", 1)[1] for setting in args.option if setting.split("=", 1)[0].lower() == "client_id"]
    return given[-1] if given else f"nsq_to_parquet-{os.getpid()}"


def wait_for_holders(args) -> None:
    """Up to ``--held-wait`` seconds for other consumers to give back or
    finish what they hold: what they give back is archived by this run."""
    deadline = time.monotonic() + args.held_wait
    held = holders_now(args)
    if held:
        print(f"nsq_to_parquet: {sum(h.in_flight for h in held)} messages are in flight to other consumers "
              f"({'; '.join(map(str, held))}); waiting up to {args.held_wait:g} s for them", flush=True)
    while held and time.monotonic() < deadline:
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        held = holders_now(args)


if __name__ == "__main__":
    sys.exit(main())
