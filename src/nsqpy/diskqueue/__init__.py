"""The on-disk FIFO behind every durable topic and channel."""

from .queue import DiskQueue, CorruptionSkipped

__all__ = ["DiskQueue", "CorruptionSkipped"]
