"""The nsqpy client: asyncio Producer and Consumer with go-nsq's behaviour,
and a blocking SyncProducer for scripts and Spark executors."""

from .config import Config, ConfigError
from .consumer import ConnectionStats, Consumer, ConsumerStats
from .dedup import DedupWindow
from .errors import (ConnectionClosedError, InvalidArgumentError, NoNodeAvailableError, NSQError, ProtocolError,
                     StoppedError)
from .message import Message
from .producer import NodeStats, Producer
from .sync import SyncProducer

__all__ = ["Config", "ConfigError", "ConnectionClosedError", "ConnectionStats", "Consumer", "ConsumerStats",
           "DedupWindow", "InvalidArgumentError", "Message", "NoNodeAvailableError", "NodeStats", "NSQError",
           "Producer", "ProtocolError", "StoppedError", "SyncProducer"]
