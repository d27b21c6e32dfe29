"""nsqd's hot modules compiled with mypyc, when this machine can compile them.

The modules every message crosses (command parsing, topic, channel, in-flight,
the connection's output) are plain typed Python; mypyc turns the same files
into C extensions, as mypy and black ship themselves. Compiling is an
optimisation, never a requirement: without mypyc, without a C compiler or
Python's headers, or with ``NSQPY_PURE=1`` in the environment, the package
installs as pure Python and behaves the same. (``NSQPY_PURE=1`` at run time
ignores a compiled build instead: see ``nsqpy/_pure.py``.)

Everything else about the package is declared in pyproject.toml.
"""

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup

#: Kept to what a profile of nsqd under NSQ's bench tools shows on the
#: message path, and what pays when compiled (see docs/benchmarks.md).
COMPILED_MODULES = [
    "src/nsqpy/diskqueue/queue.py",
    "src/nsqpy/protocol/commands.py",
    "src/nsqpy/protocol/keyed.py",
    "src/nsqpy/protocol/logchunk.py",
    "src/nsqpy/protocol/message.py",
    "src/nsqpy/nsqd/batch.py",
    "src/nsqpy/nsqd/bounds.py",
    "src/nsqpy/nsqd/busypoll.py",
    "src/nsqpy/nsqd/channel.py",
    "src/nsqpy/nsqd/client.py",
    "src/nsqpy/nsqd/deadline.py",
    "src/nsqpy/nsqd/dirty.py",
    "src/nsqpy/nsqd/guid.py",
    "src/nsqpy/nsqd/inflight.py",
    "src/nsqpy/nsqd/message.py",
    "src/nsqpy/nsqd/publish_keys.py",
    "src/nsqpy/nsqd/publishing.py",
    "src/nsqpy/nsqd/queue.py",
    "src/nsqpy/nsqd/replay.py",
    "src/nsqpy/nsqd/replay_position.py",
    "src/nsqpy/nsqd/tcp.py",
    "src/nsqpy/nsqd/topic.py",
    "src/nsqpy/nsqd/writes.py",
    "src/nsqpy/topiclog/pending.py",
]


def why_pure() -> str | None:
    """The reason this build stays pure Python, or None to compile."""
    if os.environ.get("NSQPY_PURE"):
        return "NSQPY_PURE is set"
    if sys.implementation.name != "cpython":
        return f"mypyc builds for CPython only, not {sys.implementation.name}"
    try:
        import mypyc.build  # noqa: F401  (a build requirement; absent when build isolation is off)
    except ImportError:
        return "mypyc is not installed"
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler}) on PATH"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "Python's C headers are missing (on Debian: apt-get install python3-dev)"
    return None


def extensions() -> list:
    reason = why_pure()
    if reason is not None:
        print(f"nsqpy: installing pure Python ({reason})", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    return mypycify(
        ["--ignore-missing-imports", "--follow-imports=silent", *COMPILED_MODULES],
        opt_level="3",
        group_name="nsqpy",
    )


setup(ext_modules=extensions())
