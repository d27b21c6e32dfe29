"""Retained topics' logs: append-only segments addressed by offset (log.py,
segment.py; the chunk layout is protocol/logchunk.py). nsqd decides when
they are written and serves their reads; nothing here knows of channels."""

from .log import DEFAULT_READ_BYTES, MAX_READ_BYTES, OffsetOutOfRange, ReadPlan, TopicLog

__all__ = ["DEFAULT_READ_BYTES", "MAX_READ_BYTES", "OffsetOutOfRange", "ReadPlan", "TopicLog"]
