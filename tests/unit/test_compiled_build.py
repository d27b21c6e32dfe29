"""The mypyc build (setup.py) and its run-time switch (nsqpy/_pure.py): with
``NSQPY_PURE=1`` nsqd's hot modules run from their ``.py`` files even where a
compiled build sits beside them; without it, a compiled build is what runs,
unless a source file changed after the build. Imports run in a fresh
interpreter, since a module is imported once."""

import json
import os
import subprocess
import sys
from pathlib import Path

from nsqpy import _pure

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


def test_a_source_file_edited_after_the_build_is_found(tmp_path):
    (tmp_path / "setup.py").write_text("")
    folder = tmp_path / "src" / "nsqpy" / "nsqd"
    folder.mkdir(parents=True)
    for name in ("channel", "topic"):
        (folder / f"{name}.py").write_text("")
        (folder / f"{name}.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
        os.utime(folder / f"{name}.py", (1_000_000, 1_000_000))
        os.utime(folder / f"{name}.cpython-311-x86_64-linux-gnu.so", (2_000_000, 2_000_000))
    package = str(tmp_path / "src" / "nsqpy")
    assert _pure.stale_source(package) is None
    os.utime(folder / "topic.py", (3_000_000, 3_000_000))
    assert _pure.stale_source(package) == str(folder / "topic.py")
    (tmp_path / "setup.py").unlink()  # an installed package: files are as pip wrote them
    assert _pure.stale_source(package) is None
