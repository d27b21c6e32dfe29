"""The mypyc build (setup.py) and its run-time switch (nsqpy/_pure.py): with
``NSQPY_PURE=1`` nsqd's hot modules run from their ``.py`` files even where a
compiled build sits beside them; without it, a compiled build is what runs.
Each case imports in a fresh interpreter, since a module is imported once."""

import json
import os
import subprocess
import sys
from pathlib import Path

HOT_MODULES = ["nsqpy.nsqd.channel", "nsqpy.nsqd.tcp", "nsqpy.protocol.commands"]


def imported_files(pure: bool) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name != "NSQPY_PURE"}
    if pure:
        env["NSQPY_PURE"] = "1"
    code = ("import importlib, json, sys; import nsqpy.nsqd.server; "
            f"print(json.dumps({{m: importlib.import_module(m).__file__ for m in {HOT_MODULES!r}}}))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def compiled_beside(source: str) -> list[Path]:
    path = Path(source)
    stem = path.name.split(".")[0]
    return sorted(path.parent.glob(f"{stem}.*.so")) + sorted(path.parent.glob(f"{stem}.*.pyd"))


def test_the_switch_imports_source_files():
    for module, path in imported_files(pure=True).items():
        assert path.endswith(".py"), module


def test_without_the_switch_a_compiled_build_is_what_runs():
    for module, path in imported_files(pure=False).items():
        if path.endswith(".py"):
            assert not compiled_beside(path), f"{module} has a compiled build that was not imported"
        else:
            assert Path(path) in compiled_beside(path)
