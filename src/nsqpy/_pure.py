"""``NSQPY_PURE=1`` at run time: nsqpy's own ``.py`` files are imported even
where a compiled build (setup.py, mypyc) put extension modules beside them.

Python's path finder prefers an extension module to a source file of the
same name. This finder, placed first, looks in the same folders for nsqpy's
modules with only the source and bytecode loaders, so one installation runs
(and its tests check) both ways, and a compiled build can be ruled out when
chasing a bug.

In a source checkout (an editable install) the finder is also used when a
compiled module's ``.py`` file changed after the build, which would
otherwise run the old code; a line on stderr says so until ``make test``,
``make run`` or ``pip install -e .`` rebuilds.
"""

import os
import sys
from functools import cache
from importlib.machinery import BYTECODE_SUFFIXES, SOURCE_SUFFIXES, FileFinder, SourceFileLoader, SourcelessFileLoader


@cache
def _source_finder(folder: str) -> FileFinder:
    return FileFinder(folder, (SourceFileLoader, SOURCE_SUFFIXES), (SourcelessFileLoader, BYTECODE_SUFFIXES))


class PureFinder:
    """Finds ``nsqpy.*`` modules in their package's folders, as source only."""

    @staticmethod
    def find_spec(name: str, path=None, target=None):
        if not name.startswith("nsqpy.") or not path:
            return None
        for folder in path:
            spec = _source_finder(folder).find_spec(name, target)
            if spec is not None:
                return spec
        return None


def install() -> None:
    if PureFinder not in sys.meta_path:
        sys.meta_path.insert(0, PureFinder)


def stale_source(package: str = os.path.dirname(__file__)) -> str | None:
    """In a source checkout, a compiled module's ``.py`` file newer than its
    extension module (None when there is none)."""
    if not os.path.exists(os.path.join(package, os.pardir, os.pardir, "setup.py")):
        return None
    for folder in os.scandir(package):
        if not folder.is_dir():
            continue
        for entry in os.scandir(folder.path):
            if entry.name.endswith((".so", ".pyd")):
                source = os.path.join(folder.path, entry.name.split(".")[0] + ".py")
                if os.path.exists(source) and os.stat(source).st_mtime > entry.stat().st_mtime:
                    return source
    return None
