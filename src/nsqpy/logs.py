"""Logging in NSQ's shape: ``[nsqd] 2006/01/02 15:04:05.000000 INFO: message``.

Operators' tooling and test harnesses read these lines from stderr.
"""

import logging
import sys
import time

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "error": logging.ERROR, "fatal": logging.CRITICAL}
_LEVEL_NAMES = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARNING",
                logging.ERROR: "ERROR", logging.CRITICAL: "FATAL"}


class NsqFormatter(logging.Formatter):
    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(record.created))
        micros = int((record.created % 1) * 1_000_000)
        level = _LEVEL_NAMES.get(record.levelno, record.levelname)
        text = f"{self.prefix}{stamp}.{micros:06d} {level}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def setup_logging(name: str, prefix: str, level: str) -> logging.Logger:
    logger = logging.getLogger(name)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(NsqFormatter(prefix))
    logger.handlers[:] = [handler]
    logger.setLevel(LEVELS[level])
    logger.propagate = False
    # the disk queue logs through its own logger; give it the daemon's shape
    disk_logger = logging.getLogger("nsqpy.diskqueue")
    disk_logger.handlers[:] = [handler]
    disk_logger.setLevel(LEVELS[level])
    disk_logger.propagate = False
    return logger
