"""Archiving a topic to Parquet: the Structured Streaming job behind ``nsq_to_parquet``.

Rows land under ``<output>/date=YYYY-MM-DD/hour=HH/`` by the message's
timestamp (UTC). Spark's file sink commits each micro-batch in its
``_spark_metadata`` log, and the ``nsq`` source FINishes a batch's messages
only after that commit, so an archived message is acknowledged and an
acknowledged message is archived.

A graceful stop goes through the source's drain file (``drain.py``): the
source answers what is committed, gives back what it received but did not
archive, waits until nsqd confirmed those answers, and reads no more; then
the query stops.
"""

import json
import os
import re
import time
from dataclasses import dataclass

from pyspark.sql import functions as F

from . import drain
from .backlog import channel_lag, find_http_addresses
from .ledger import position
from .options import lowered
from .uncommitted import remove_uncommitted

DRAIN_FILE = "nsq-drain"
WAL_DIR = "nsq-wal"  # the source's log, when the executors reader is not given a walPath


def drain_file(checkpoint_dir: str) -> str:
    return os.path.join(checkpoint_dir, DRAIN_FILE)


def start_archive(spark, source_options: dict, output_dir: str, checkpoint_dir: str, *,
                  trigger: str | None = None, available_now: bool = False):
    """Start the archive query; ``source_options`` are the ``nsq`` source's.
    Files a killed run left uncommitted are removed first, so that every
    Parquet reader sees exactly the committed batches. With
    ``reader=executors`` and no ``walPath``, the log goes under the checkpoint."""
    os.makedirs(checkpoint_dir, exist_ok=True)
    remove_uncommitted(output_dir, checkpoint_dir)
    named = lowered(source_options)
    if named.get("reader", "").lower() == "executors" and "walpath" not in named:
        source_options = {**source_options, "walPath": os.path.join(os.path.abspath(checkpoint_dir), WAL_DIR)}
    drain_request = drain_file(checkpoint_dir)
    drain.clear(drain_request)
    messages = spark.readStream.format("nsq").options(**source_options).option("drain_file", drain_request).load()
    return write_archive(messages, output_dir, checkpoint_dir,
                         f"nsq_to_parquet {source_options['topic']}/{source_options['channel']}",
                         trigger=trigger, available_now=available_now)


def with_date_and_hour(messages):
    """The archive's partition columns, from each message's timestamp (UTC)."""
    return (messages.withColumn("date", F.date_format("timestamp", "yyyy-MM-dd"))
            .withColumn("hour", F.date_format("timestamp", "HH")))


def write_archive(messages, output_dir: str, checkpoint_dir: str, name: str, *,
                  trigger: str | None = None, available_now: bool = False):
    """Start the streaming query writing ``messages`` (the source's columns)
    to Parquet by date and hour: the archive's query for any source, so a
    benchmark measures the same query over a reference source."""
    writer = (with_date_and_hour(messages).writeStream.format("parquet").option("path", output_dir)
              .option("checkpointLocation", checkpoint_dir).partitionBy("date", "hour").queryName(name))
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger:
        writer = writer.trigger(processingTime=trigger)
    return writer.start()


def stop_gracefully(query, drain_request: str, timeout: float = 60.0) -> drain.Drain:
    """Stop a query reading the ``nsq`` source with ``drain_file=<drain_request>``:
    ask the source to drain, wait until it has (the batch running now
    commits first, then every acknowledgement is confirmed by nsqd), then
    stop the query. The result is false when the source did not confirm in
    time (or the query failed; the query is stopped anyway, and what was not
    FINished is redelivered by nsqd), or when nsqd did not confirm some FINs
    (``unconfirmed`` says how many archived messages may come back). A query
    that ended by itself without error (availableNow) FINished its last
    batch already."""
    drain.request(drain_request)
    deadline = time.monotonic() + timeout
    report = None
    while query.isActive and time.monotonic() < deadline:
        report = drain.read_report(drain_request)
        if report is not None:
            break
        time.sleep(0.05)
    report = report or drain.read_report(drain_request)
    if report is None:
        report = drain.Drain(confirmed=not query.isActive and query.exception() is None)
    query.stop()
    return report


_PYTHON_ERROR = re.compile(r"^(?:\w+\.)*(\w+(?:Error|Exception)): (.*)$", re.MULTILINE)


def failure_reason(error) -> str:
    """One line for a failed query: the innermost Python error Spark wrapped
    (``ConnectionClosedError: cannot connect to nsqd at ...``), else Spark's
    first line."""
    text = getattr(error, "desc", None) or str(error)
    found = [match for match in _PYTHON_ERROR.finditer(text) if "Traceback" not in match.group(2)]
    if found:
        return f"{found[-1].group(1)}: {found[-1].group(2)}"
    return text.strip().splitlines()[0] if text.strip() else repr(error)


def _offset_position(value) -> int | None:
    """The message count in a progress report's offset (a JSON string, a dict,
    or null); None for the executors reader's offsets, which count batches."""
    if isinstance(value, str):
        value = json.loads(value)
    return position(value) if value and "messages" in value else None  # the log reader's count offsets per node


def input_rows(report) -> int:
    """Rows a progress report's batch read. Reports reaching a Spark Connect
    client carry the count per source only."""
    rows = report.get("numInputRows")
    return rows if rows is not None else sum(source["numInputRows"] for source in report["sources"])


@dataclass
class Progress:
    """What this run archived. With the driver reader, rows come from the
    source's offsets (they count messages), so a progress report dropped from
    Spark's short history between two status lines loses nothing; the
    executors reader's offsets count batches, so its rows are summed from
    the reports."""
    batches: int = 0
    rows: int = 0
    last_batch: int = -1
    first_position: int | None = None

    def update(self, query) -> None:
        for report in query.recentProgress:
            if report["batchId"] <= self.last_batch or not input_rows(report):
                continue
            self.last_batch = report["batchId"]
            self.batches += 1
            source = report["sources"][0]
            end = _offset_position(source["endOffset"])
            if end is None:
                self.rows += input_rows(report)
                continue
            if self.first_position is None:
                self.first_position = _offset_position(source["startOffset"]) or 0
            self.rows = end - self.first_position


class StatusLine:
    """``batches 12, rows 120000 (24310/s, last 30100/s), lag 3400``: rows/s
    over the run so far (the last line of a run is its rate) and over the
    interval since the previous line; lag from nsqd's ``/stats`` for the
    channel (ready, in flight and deferred), or the log reader's offsets,
    ``unknown`` with the reason when nsqd cannot tell; while a batch runs,
    how long it has been running (a first batch can take a minute on a busy
    machine, and nothing commits meanwhile). ``bar`` is the same as a
    progress bar, for a terminal."""

    def __init__(self, source_options: dict, clock=time.monotonic, reader: str = "driver"):
        self.options = source_options
        self.reader = reader
        self.progress = Progress()
        self._clock = clock
        self._started = clock()
        self._previous = (self._started, 0)  # (when, rows) at the previous line
        self._running_since: tuple[float, int] | None = None  # (since when, batches committed then)
        self._addresses: list[str] = []
        self.rate = self.interval_rate = 0.0
        self.lag = ""

    def _lag(self) -> str:
        options = self.options

        def listed(name):
            return [a for a in options.get(name, "").split(",") if a]

        if not self._addresses or listed("lookupd_http_addresses"):  # nsqlookupd may list new nodes
            self._addresses = find_http_addresses(listed("nsqd_http_addresses"), listed("lookupd_http_addresses"),
                                                  listed("nsqd_tcp_addresses"), options["topic"])
        if not self._addresses:
            return "unknown (give --nsqd-http-address)"
        lag = channel_lag(self._addresses, options["topic"], options["channel"])
        return "unknown (nsqd not answering)" if lag is None else str(lag)

    def render(self, query) -> str:
        self._update(query)
        return (f"batches {self.progress.batches}, rows {self.progress.rows} ({self.rate:.0f}/s, last "
                f"{self.interval_rate:.0f}/s), lag {self.lag}{self._running(query)}")

    def bar(self, query, width: int = 30) -> str:
        """``[#########.....] 62% 310,000 of 500,000 rows, 41,000/s, 5s left``
        (what is left is the lag, so the whole is what is read plus it)."""
        self._update(query)
        rows = self.progress.rows
        if not self.lag.isdigit():
            return f"{rows:,} rows, {self.interval_rate:,.0f}/s, lag {self.lag}{self._running(query)}"
        left = int(self.lag)
        done = rows / (rows + left) if rows + left else 1.0
        filled = round(done * width)
        eta = f"{left / self.interval_rate:.0f}s left" if self.interval_rate and left else "—"
        return (f"[{'#' * filled}{'.' * (width - filled)}] {done:4.0%} {rows:,} of {rows + left:,} rows, "
                f"{self.interval_rate:,.0f}/s, {eta}{self._running(query)}")

    def _update(self, query) -> None:
        self.progress.update(query)
        now, rows = self._clock(), self.progress.rows
        self.rate = rows / max(now - self._started, 1e-9)
        since, before = self._previous
        self.interval_rate = (rows - before) / max(now - since, 1e-9)
        self._previous = (now, rows)
        self.lag = log_lag(query.lastProgress) if self.reader == "log" else self._lag()

    def _running(self, query) -> str:
        status = getattr(query, "status", None) or {}
        if not status.get("isTriggerActive") or not status.get("isDataAvailable"):
            self._running_since = None
            return ""
        now, batches = self._clock(), self.progress.batches
        if self._running_since is None or self._running_since[1] != batches:  # a new batch since
            self._running_since = (now, batches)
        return f", a batch running for {now - self._running_since[0]:.0f}s"


def log_lag(report) -> str:
    """The log reader's lag: on every nsqd, from where the last batch ended
    to the log's end (its offsets and ``reportLatestOffset`` in the report)."""
    if not report or not report.get("sources"):
        return "unknown (no batch yet)"
    source = report["sources"][0]
    latest, end = (json.loads(value) if isinstance(value, str) else value
                   for value in (source.get("latestOffset"), source.get("endOffset")))
    if not latest or not end:
        return "unknown (no batch yet)"
    return str(sum(max(0, offset - end["offsets"].get(node, 0)) for node, offset in latest["offsets"].items()))
