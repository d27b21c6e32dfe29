"""nsq_to_file: archive topics to newline-delimited files, as NSQ's tool does.

One consumer and one ``ArchiveFile`` per topic. A message's line is written
as soon as it arrives (as NSQ's tool writes it: ``tail -f`` sees it at once,
gzip aside, whose compressor holds it until the member ends), but the
message is held, not answered, until the file holding it is fsynced: every
``--sync-interval``, as soon as half of max-in-flight are held (NSQ waits
for all of them; at half, the other half streams in while the file syncs)
or the consumer is starved, at rotation, SIGHUP and exit. Only then are they
FINished, so a crash at any moment loses nothing: whatever was not synced
is still in flight at nsqd and comes back (and may be in the file twice).
Writing and syncing run in one worker thread per topic; the event loop only
collects messages and answers them.
"""

import asyncio
import concurrent.futures
import dataclasses
import logging
import os
import re
import signal
import time

import aiohttp

from ..client import Consumer
from ..options import option
from . import lookupd
from .app import ToolError, user_agent
from .archive_file import ArchiveFile, FileSettings, filename_template
from .clientopts import DELIVERING_DEFAULTS, client_config
from .consuming import subscribe
from .options import SourceOptions, check_names, check_sources


@dataclasses.dataclass
class NsqToFileOptions(SourceOptions):
    topics: list[str] = option([], "nsq topic (may be given multiple times)", flag="topic")
    topic_pattern: str = option("", "only log topics matching the following pattern")
    topic_refresh: float = option(60.0, "how frequently the topic list should be refreshed", duration=True)
    channel: str = option("nsq_to_file", "nsq channel")
    output_dir: str = option("/tmp", "directory to write output files to")
    work_dir: str = option("", "directory for in-progress files before moving to output-dir")
    filename_format: str = option("<TOPIC>.<HOST><REV>.<DATETIME>.log", "output filename format (<TOPIC>, "
                                  "<HOST>, <PID>, <DATETIME>, <REV> are replaced. <REV> is increased when file "
                                  "already exists)")
    datetime_format: str = option("%Y-%m-%d_%H", "strftime compatible format for <DATETIME> in filename format")
    host_identifier: str = option("", "value to output in log filename in place of hostname. <SHORT_HOST> and "
                                  "<HOSTNAME> are valid replacement tokens")
    gzip: bool = option(False, "gzip output files.")
    gzip_level: int = option(6, "gzip compression level (1-9, 1=BestSpeed, 9=BestCompression)")
    rotate_size: int = option(0, "rotate the file when it grows bigger than rotate-size bytes")
    rotate_interval: float = option(0.0, "rotate the file every duration", duration=True)
    skip_empty_files: bool = option(False, "skip writing empty files")
    sync_interval: float = option(30.0, "sync file to disk every duration", duration=True)
    log_level: str = option("info", "set log verbosity: debug, info, warn, error, or fatal",
                            choices=("debug", "info", "warn", "error", "fatal"))
    log_prefix: str = option("[nsq_to_file] ", "log message prefix")
    http_client_connect_timeout: float = option(2.0, "timeout for HTTP connect", duration=True)
    http_client_request_timeout: float = option(5.0, "timeout for HTTP request", duration=True)


class TopicArchiver:
    """A topic's consumer, its file, and the loop that syncs and answers."""

    def __init__(self, topic: str, options: NsqToFileOptions, settings: FileSettings, config, log, on_failure):
        self.topic = topic
        self.label = f"[{topic}/{options.channel}]"
        template = filename_template(options.filename_format, topic, options.host_identifier, settings)
        self.file = ArchiveFile(template, settings, log, self.label)
        self.consumer = Consumer(topic, options.channel, self._handle, config=config)
        self.log = log
        self._batch_size = max(1, config.max_in_flight // 2)
        self._sync_interval = options.sync_interval
        self._skip_empty = options.skip_empty_files
        self._on_failure = on_failure
        self._held: list = []  # arrived, not yet written
        self._unsynced: list = []  # written, not yet fsynced: answered at the next sync
        self._wake = asyncio.Event()
        self._hup = False
        self._stopping = False
        self._closing = False
        self._broken = False
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"nsq_to_file-{topic}")
        self.task: asyncio.Task | None = None

    async def _handle(self, message) -> None:
        message.disable_auto_response()
        self._held.append(message)
        self._wake.set()

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    def hup(self) -> None:
        self._hup = True
        self._wake.set()

    async def stop(self) -> None:
        """CLS, keep syncing what still arrives until nsqd has every answer,
        then sync and close the file."""
        self._stopping = True
        self._wake.set()
        await self.consumer.stop()
        self._closing = True
        self._wake.set()
        await self.task
        self._worker.shutdown()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = loop.time() + self._sync_interval
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), max(0.0, next_tick - loop.time()))
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            tick = loop.time() >= next_tick
            if tick:
                next_tick = loop.time() + self._sync_interval
            closing, hup = self._closing, self._hup
            self._hup = False
            messages, self._held = self._held, []
            await self._write(messages, tick, self._sync_due(tick or hup or closing, len(messages)), hup or closing)
            if closing:
                return

    def _sync_due(self, forced: bool, arrived: int) -> bool:
        """Whether this turn fsyncs and answers what is written: held messages
        cost nsqd's in-flight slots, so not only at the interval."""
        return (forced or self._stopping or len(self._unsynced) + arrived >= self._batch_size
                or self.consumer.is_starved())

    async def _write(self, messages: list, tick: bool, sync: bool, close: bool) -> None:
        if not (messages or sync):
            return
        if self._broken:
            self._requeue(messages)
            return
        self._unsynced.extend(messages)
        synced = len(self._unsynced) if sync else None
        try:
            await asyncio.get_running_loop().run_in_executor(self._worker, self._write_and_sync,
                                                             [message.body for message in messages], tick,
                                                             synced, close)
        except OSError as error:
            # the file is back at its last synced length: every unsynced line is gone with it
            self._broken = True
            self.log.error("%s writing %s failed: %s; %d messages requeued, stopping", self.label,
                           self.file.path or self.file.settings.work_dir, error.strerror or error,
                           len(self._unsynced))
            self._requeue(self._unsynced)
            self._unsynced = []
            self._on_failure()
            return
        if sync and self._unsynced:
            self.consumer.finish_all(self._unsynced)
            self._unsynced = []

    def _write_and_sync(self, bodies: list[bytes], tick: bool, synced: int | None, close: bool) -> None:
        """In the worker thread: what NSQ's router loop does with the messages
        that came; ``synced`` (the records written since the last sync) when
        this turn fsyncs."""
        file = self.file
        now = time.time()
        if tick and file.needs_rotation(now):
            if self._skip_empty:
                file.close()
            else:
                file.rotate(now)
        start = 0
        while start < len(bodies):
            if file.needs_rotation(now):
                file.rotate(now)
            end = self._fitting(bodies, start)
            file.write(b"\n".join(bodies[start:end]) + b"\n")
            start = end
        if synced is None:
            return
        if synced:  # every sync of a steady flow would be a line; a file closed is worth one
            self.log.log(logging.INFO if close else logging.DEBUG, "%s syncing %d records to disk", self.label,
                         synced)
        file.sync()
        if close:
            file.close()

    def _fitting(self, bodies: list[bytes], start: int) -> int:
        """Where the write from ``start`` ends: before the first message that
        finds the file past ``--rotate-size`` (NSQ checks before each one)."""
        limit = self.file.settings.rotate_size
        if limit <= 0:
            return len(bodies)
        size = self.file.size
        for index in range(start, len(bodies)):
            if size > limit and index > start:
                return index
            size += len(bodies[index]) + 1
        return len(bodies)

    def _requeue(self, messages: list) -> None:
        for message in messages:
            if message.can_respond:
                message.requeue(backoff=False)


def check(options: NsqToFileOptions) -> FileSettings:
    if not 1 <= options.gzip_level <= 9:
        raise ToolError(f"invalid --gzip-level value ({options.gzip_level}), should be 1-9")
    if not options.topics and not options.topic_pattern:
        raise ToolError("--topic or --topic-pattern required")
    check_sources(options)
    if not options.topics and not options.lookupd_http_addresses:
        raise ToolError("--lookupd-http-address must be specified when no --topic specified")
    check_names(options.topics or ["pattern"], options.channel)
    if options.topic_pattern:
        try:
            re.compile(options.topic_pattern)
        except re.error as error:
            raise ToolError(f"--topic-pattern {options.topic_pattern!r}: {error}") from None
    if options.sync_interval <= 0:
        raise ToolError("--sync-interval must be positive")
    settings = FileSettings(output_dir=os.path.abspath(options.output_dir),
                            work_dir=os.path.abspath(options.work_dir or options.output_dir),
                            datetime_format=options.datetime_format, gzip=options.gzip,
                            gzip_level=options.gzip_level, rotate_size=options.rotate_size,
                            rotate_interval=options.rotate_interval)
    try:
        filename_template(options.filename_format, "topic", options.host_identifier, settings)
    except ValueError as error:
        raise ToolError(str(error)) from None
    for flag, path in (("--output-dir", settings.output_dir), ("--work-dir", settings.work_dir)):
        check_writable(flag, path)
    return settings


def check_writable(flag: str, path: str) -> None:
    """Create the directory if need be and prove a file can be made there."""
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".nsq_to_file-probe-{os.getpid()}")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as error:
        raise ToolError(f"{flag} {path} is not writable: {error.strerror or error}") from None


class Archivers:
    """The running TopicArchivers, one per topic, started as topics are found."""

    def __init__(self, options: NsqToFileOptions, settings: FileSettings, config, log, stop: asyncio.Event):
        self.options = options
        self.settings = settings
        self.config = config
        self.log = log
        self.stop_event = stop
        self.failed = False
        self.by_topic: dict[str, TopicArchiver] = {}

    def allowed(self, topic: str) -> bool:
        return not self.options.topic_pattern or re.search(self.options.topic_pattern, topic) is not None

    async def add(self, topics) -> None:
        for topic in topics:
            if topic in self.by_topic:
                continue
            if not self.allowed(topic):
                self.log.warning("skipping topic %s (doesn't match pattern %s)", topic, self.options.topic_pattern)
                continue
            archiver = TopicArchiver(topic, self.options, self.settings, self.config, self.log, self._failed)
            self.by_topic[topic] = archiver
            archiver.start()
            await subscribe([archiver.consumer], self.options)

    def _failed(self) -> None:
        self.failed = True
        self.stop_event.set()

    def hup(self) -> None:
        for archiver in self.by_topic.values():
            archiver.hup()

    async def stop(self) -> None:
        await asyncio.gather(*(archiver.stop() for archiver in self.by_topic.values()))


async def discover(archivers: Archivers, options: NsqToFileOptions, stop: asyncio.Event, log) -> None:
    """``--topic-pattern`` without ``--topic``: ask nsqlookupd now and every ``--topic-refresh``."""
    timeout = aiohttp.ClientTimeout(total=options.http_client_request_timeout,
                                    sock_connect=options.http_client_connect_timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while not stop.is_set():
            found = await lookupd.topics(session, options.lookupd_http_addresses)
            await archivers.add(sorted(found))
            try:
                await asyncio.wait_for(stop.wait(), options.topic_refresh)
            except asyncio.TimeoutError:
                pass


async def run(options: NsqToFileOptions, stop: asyncio.Event, log) -> int:
    settings = check(options)
    config = client_config(user_agent("nsq_to_file"), "consumer-opt", options.consumer_opts,
                           defaults=DELIVERING_DEFAULTS, max_in_flight=options.max_in_flight)
    archivers = Archivers(options, settings, config, log, stop)
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, archivers.hup)
    try:
        if options.topics:
            await archivers.add(options.topics)
            await stop.wait()
        else:
            await discover(archivers, options, stop, log)
    finally:
        await archivers.stop()
    return 1 if archivers.failed else 0
