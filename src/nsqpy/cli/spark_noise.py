"""Lines Spark prints at every start and stop that tell a person running
``nsq_to_parquet`` nothing: the JVM's incubator-module notice, log4j's
profile banner, Hadoop's missing native library, adaptive execution being
off for streams, a trigger "falling behind" while a batch waits to fill,
and the job-group cancellations of a normal stop. They are dropped from
this process's standard error and from the JVM's, which inherits it;
every other line, Spark's real warnings and errors included, passes as it
came.

The filter sits on file descriptor 2 (a pipe read by a thread), because the
JVM writes there directly; ``restore`` puts the terminal back and lets the
thread pass on what is left."""

import os
import re
import sys
import threading

HARMLESS = re.compile("|".join((
    r"^WARNING: Using incubator modules: jdk\.incubator\.vector",
    r"^Using Spark's default log4j profile: ",
    r'^Setting default log level to "WARN"\.',
    r"^To adjust logging level use sc\.setLogLevel\(newLevel\)",
    r" WARN NativeCodeLoader: Unable to load native-hadoop library",
    r" WARN ResolveWriteToStream: spark\.sql\.adaptive\.enabled is not supported in streaming",
    r" WARN ProcessingTimeExecutor: Current batch is falling behind",
    r" (WARN|ERROR) DAGScheduler: Failed to cancel job group",
)))
_DRAIN_SECONDS = 2.0


class QuietStderr:
    def __init__(self):
        sys.stderr.flush()
        self._terminal = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self._thread = threading.Thread(target=self._pass_on, args=(read_end,), name="nsqpy-quiet-stderr",
                                        daemon=True)
        self._thread.start()

    def _pass_on(self, read_end: int) -> None:
        with open(read_end, "rb") as lines, open(self._terminal, "wb", buffering=0, closefd=False) as out:
            for line in lines:
                if not HARMLESS.search(line.decode("utf-8", "replace")):
                    try:
                        out.write(line)
                    except OSError:  # the terminal is gone: keep draining, or writers would block
                        pass

    def terminal(self):
        """The real standard error as a text stream when it is a terminal
        (for a progress bar drawn in place, which a filter line by line
        would hold back), else None."""
        if not os.isatty(self._terminal):
            return None
        return open(self._terminal, "w", closefd=False)

    def restore(self) -> None:
        """Standard error is the terminal again; what the pipe still holds
        is passed on (the JVM, gone by now, held its other end)."""
        sys.stderr.flush()
        os.dup2(self._terminal, 2)
        self._thread.join(_DRAIN_SECONDS)
        if not self._thread.is_alive():
            os.close(self._terminal)
