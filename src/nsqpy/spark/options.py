"""The ``nsq`` data source's options, checked once with one clear message each.

Spark hands options over as strings in a case-insensitive dict with
lowercased keys, so every name here is matched lowercased. Any option named
like a client ``Config`` field (``msg_timeout``, ``tls_v1``, ``snappy``,
``auth_secret``, ...) configures the connections to nsqd.
"""

import dataclasses
import json

from ..client.config import Config, ConfigError
from ..protocol.names import is_valid_channel_name, is_valid_topic_name

_CONFIG_FIELDS = {field.name: field for field in dataclasses.fields(Config)}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class OptionError(ValueError):
    """An option is missing or unusable; the message names it."""


def lowered(options) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in dict(options or {}).items()}


def _addresses(options: dict, name: str, urls: bool = False) -> tuple[str, ...]:
    """Comma-separated ``host:port`` (or, where ``urls``, http(s) URLs too)."""
    found = tuple(part.strip() for part in options.get(name, "").split(",") if part.strip())
    for address in found:
        if urls and address.startswith(("http://", "https://")):
            continue
        _, sep, port = address.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise OptionError(f"option {name}: {address!r} is not host:port")
    return found


def _refuse_unknown(options: dict, known: set[str]) -> None:
    unknown = sorted(set(options) - known - set(_CONFIG_FIELDS))
    if unknown:
        raise OptionError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(known))}, and the client Config fields)")


def _convert(name: str, kind, text: str):
    try:
        if kind is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError
        return kind(text)
    except ValueError:
        raise OptionError(f"option {name}: expected {kind.__name__}, got {text!r}") from None


def client_config(options: dict[str, str], **defaults) -> Config:
    """A client Config from the options that name its fields (over ``defaults``)."""
    values = dict(defaults)
    for name, field in _CONFIG_FIELDS.items():
        if name in options:
            values[name] = _convert(name, field.type, options[name])
    try:
        return Config(**values)
    except ConfigError as error:
        raise OptionError(f"option {error}") from None


def _number(options: dict, name: str, default, kind=float, minimum=0):
    value = _convert(name, kind, options[name]) if name in options else default
    if value < minimum:
        raise OptionError(f"option {name} must be >= {minimum} (got {value})")
    return value


def _topic(options: dict) -> str:
    topic = options.get("topic", "")
    if not is_valid_topic_name(topic):
        raise OptionError(f"option topic: {'missing' if not topic else f'invalid topic name {topic!r}'}")
    return topic


#: the log reader's options (retained topics), with the names and meanings of Spark's Kafka source
LOG_OPTIONS = ("startingOffsets", "startingTimestamp", "endingOffsets", "endingTimestamp", "maxOffsetsPerTrigger",
               "minPartitions", "failOnDataLoss", "readTimeout")


def _reader(options: dict) -> str:
    """The reader asked for; "" when none is (the log reader for a topic
    retained on every nsqd, else the driver reader)."""
    reader = options.get("reader", "").lower()
    if not reader:
        return reader
    if reader not in READERS:
        raise OptionError(f"option reader: {reader!r} is not one of {', '.join(READERS)}")
    return reader


_SOURCE_OPTIONS = {"topic", "channel", "nsqd_tcp_addresses", "lookupd_http_addresses", "nsqd_http_addresses",
                   "max_messages_per_batch", "batch_wait", "idle_timeout", "walpath", "drain_file", "dedup_key",
                   "reader", "max_messages_per_partition", *(name.lower() for name in LOG_OPTIONS)}
READERS = ("driver", "executors", "log")


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    topic: str
    channel: str
    nsqd_tcp_addresses: tuple[str, ...]
    lookupd_http_addresses: tuple[str, ...]
    nsqd_http_addresses: tuple[str, ...]  # for "available now" and lag; found through lookupd otherwise
    max_messages_per_batch: int
    batch_wait: float  # seconds a batch may wait to fill once its first message is in
    idle_timeout: float  # under availableNow: this long with nothing new means all was read
    wal_path: str
    drain_file: str
    dedup_key: bool
    reader: str  # "driver": one consumer in Spark's driver; "executors": partitions read by tasks;
    #              "log": offset ranges of a retained topic read by tasks; "": chosen by the topic
    max_messages_per_partition: int  # the executors and log readers' cap on what one task reads
    config: Config
    log: "LogOptions"

    @classmethod
    def parse(cls, raw) -> "SourceOptions":
        options = lowered(raw)
        _refuse_unknown(options, _SOURCE_OPTIONS)
        channel = options.get("channel", "")
        if channel and not is_valid_channel_name(channel):
            raise OptionError(f"option channel: invalid name {channel!r}")
        nsqd = _addresses(options, "nsqd_tcp_addresses")
        lookupd = _addresses(options, "lookupd_http_addresses", urls=True)
        if not nsqd and not lookupd:
            raise OptionError("give nsqd_tcp_addresses or lookupd_http_addresses (comma-separated host:port)")
        per_batch = _number(options, "max_messages_per_batch", 10000, int, minimum=1)
        # held messages stay in flight until their batch commits, so room for
        # two batches lets the next one fill while Spark writes this one
        config = client_config(options, max_in_flight=2 * per_batch, max_attempts=0)
        if config.max_attempts:
            raise OptionError("option max_attempts: the source archives every message it receives (the attempts "
                              "column counts deliveries); nsqd's --max-attempts sets a dead-letter limit")
        return cls(
            topic=_topic(options), channel=channel, nsqd_tcp_addresses=nsqd, lookupd_http_addresses=lookupd,
            nsqd_http_addresses=_addresses(options, "nsqd_http_addresses", urls=True),
            max_messages_per_batch=per_batch,
            batch_wait=_number(options, "batch_wait", 0.5),
            idle_timeout=_number(options, "idle_timeout", 2.0),
            wal_path=options.get("walpath", ""), drain_file=options.get("drain_file", ""),
            dedup_key=_convert("dedup_key", bool, options.get("dedup_key", "false")),
            reader=_reader(options),
            max_messages_per_partition=_number(options, "max_messages_per_partition", 20000, int, minimum=1),
            config=config,
            log=LogOptions.parse(options),
        )

    def require_channel(self) -> None:
        """The channel readers read a channel: ``OptionError`` without one."""
        if not self.channel:
            raise OptionError("option channel: missing (the topic is not retained on every nsqd, so it is read "
                              "through a channel)")


@dataclasses.dataclass(frozen=True)
class LogPoint:
    """Where a log read starts or ends: ``<edge>Offsets`` (``earliest``,
    ``latest`` or JSON per nsqd; "" when not given) or ``<edge>Timestamp``
    (Unix ms, over the offsets when given)."""
    edge: str  # "starting" or "ending", as the options are named
    offsets: str
    timestamp: int | None


@dataclasses.dataclass(frozen=True)
class LogOptions:
    """The log reader's options (retained topics), as Spark's Kafka source
    names them. Offsets are per nsqd node, keyed by its TCP address."""
    starting: LogPoint  # offsets "": latest when streaming, earliest for a batch read (as Kafka's source has it)
    ending: LogPoint  # batch reads only; offsets "": latest
    max_offsets_per_trigger: int  # 0: no limit; max_messages_per_batch when only that is given
    min_partitions: int  # 0: as many as max_messages_per_partition gives
    fail_on_data_loss: bool
    read_timeout: float  # seconds a task waits for an nsqd that does not answer before it fails
    given: tuple[str, ...]  # the names of those given, as LOG_OPTIONS spells them

    @classmethod
    def parse(cls, options: dict) -> "LogOptions":
        return cls(
            starting=LogPoint("starting", _log_point(options, "startingoffsets"),
                              _timestamp(options, "startingTimestamp")),
            ending=LogPoint("ending", _log_point(options, "endingoffsets"), _timestamp(options, "endingTimestamp")),
            # a batch cap given for the channel readers caps the log reader's batches too
            max_offsets_per_trigger=_number(options, "maxoffsetspertrigger",
                                            _number(options, "max_messages_per_batch", 0, int), int),
            min_partitions=_number(options, "minpartitions", 0, int),
            fail_on_data_loss=_convert("failOnDataLoss", bool, options.get("failondataloss", "true")),
            read_timeout=_number(options, "readtimeout", 60.0),
            given=tuple(name for name in LOG_OPTIONS if name.lower() in options),
        )


#: Unix milliseconds below this are before March 1973, and as Unix seconds it is the year 5138: a smaller
#: value is seconds given for milliseconds (as a start it would read a whole log, as an end nothing)
_FIRST_MILLISECOND = 10 ** 11


def _timestamp(options: dict, name: str) -> int | None:
    """``name``'s Unix milliseconds, None when not given; a value in seconds
    is refused with the value it likely meant."""
    if name.lower() not in options:
        return None
    value = _convert(name, int, options[name.lower()])
    if value < _FIRST_MILLISECOND:
        meant = f": in seconds? the same time is {value * 1000}" if value > 0 else ""
        raise OptionError(f"option {name} takes Unix milliseconds, and {value} is before 1973{meant}")
    return value


def _log_point(options: dict, name: str) -> str:
    """``earliest``, ``latest``, or JSON of offsets per nsqd (``-2``:
    earliest, ``-1``: latest, as Kafka's source writes them); "" when not given."""
    text = options.get(name, "").strip()
    if text in ("earliest", "latest", ""):
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(
            isinstance(key, str) and isinstance(value, int) and not isinstance(value, bool) and value >= -2
            for key, value in parsed.items()):
        raise OptionError(f"option {name}: expected earliest, latest or JSON like {{\"127.0.0.1:4150\": 1200}} "
                          f"(offsets per nsqd TCP address; -2 earliest, -1 latest), got {text!r}")
    return text


@dataclasses.dataclass(frozen=True)
class SinkOptions:
    topic: str
    nsqd_tcp_addresses: tuple[str, ...]
    mpub_max_messages: int
    mpub_max_bytes: int  # below nsqd's --max-body-size (5 MiB by default)
    publish_timeout: float
    dedup_key: bool
    batch_id: int  # for a batch (not streaming) write with dedup_key or publish_keys
    publish_keys: bool  # keyed publishes (protocol/keyed.py), keys derived (sink.py)
    key_column: str  # keyed publishes, each row's key from this column
    key_prefix: str  # what derived keys start with (a streaming write: its query id)
    config: Config

    @classmethod
    def parse(cls, raw) -> "SinkOptions":
        options = lowered(raw)
        nsqd = _addresses(options, "nsqd_tcp_addresses")
        if not nsqd:
            raise OptionError("give nsqd_tcp_addresses (comma-separated host:port) to publish to")
        return cls(
            topic=_topic(options), nsqd_tcp_addresses=nsqd,
            mpub_max_messages=_number(options, "mpub_max_messages", 500, int, minimum=1),
            mpub_max_bytes=_number(options, "mpub_max_bytes", 4 << 20, int, minimum=1024),
            publish_timeout=_number(options, "publish_timeout", 30.0),
            dedup_key=_convert("dedup_key", bool, options.get("dedup_key", "false")),
            batch_id=_number(options, "batch_id", 0, int),
            publish_keys=_convert("publish_keys", bool, options.get("publish_keys", "false")),
            key_column=options.get("key_column", ""),
            key_prefix=options.get("key_prefix", ""),
            config=client_config(options),
        )
