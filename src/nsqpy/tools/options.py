"""The flags every consuming tool takes, and NSQ's checks on them."""

import dataclasses

from ..options import option
from ..protocol.names import RULE, is_valid_channel_name, is_valid_topic_name
from .app import ToolError, UsageError


@dataclasses.dataclass
class SourceOptions:
    """Where messages come from: nsqd directly or through nsqlookupd, never both."""
    nsqd_tcp_addresses: list[str] = option([], "nsqd TCP address (may be given multiple times)",
                                           flag="nsqd-tcp-address")
    lookupd_http_addresses: list[str] = option([], "lookupd HTTP address (may be given multiple times)",
                                               flag="lookupd-http-address")
    max_in_flight: int = option(200, "max number of messages to allow in flight")
    consumer_opts: list[str] = option([], "option to passthrough to nsq.Consumer, name,value (may be given "
                                      "multiple times, go-nsq's Config names)", flag="consumer-opt")


def check_sources(options: SourceOptions) -> None:
    if not options.nsqd_tcp_addresses and not options.lookupd_http_addresses:
        raise ToolError("--nsqd-tcp-address or --lookupd-http-address required")
    if options.nsqd_tcp_addresses and options.lookupd_http_addresses:
        raise ToolError("use --nsqd-tcp-address or --lookupd-http-address not both")
    if options.max_in_flight < 1:
        raise ToolError(f"--max-in-flight must be at least 1 (got {options.max_in_flight})")


def invalid_name(flag: str, name: str) -> str:
    """The line that refuses a topic or channel name, with the rule it broke."""
    return f"{flag} {name!r} is invalid ({RULE})"


def check_names(topics: list[str], channel: str) -> None:
    """NSQ's tools refuse a bad name before connecting, not after nsqd's
    E_BAD_TOPIC: a usage error (exit code 2), in every tool alike."""
    if not topics or not channel:
        raise ToolError("--topic and --channel are required")
    for topic in topics:
        check_topic("--topic", topic)
    if not is_valid_channel_name(channel):
        raise UsageError(invalid_name("--channel", channel))


def check_topic(flag: str, topic: str) -> None:
    """A topic name no run could publish to or read: ``UsageError``."""
    if not is_valid_topic_name(topic):
        raise UsageError(invalid_name(flag, topic))
