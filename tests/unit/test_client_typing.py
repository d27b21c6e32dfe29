"""The client's type hints, checked with ``mypy --strict``.

``nsqpy.client`` is a library: its hints are part of its API, read by its
users' type checkers and editors. A wrong or missing hint there is a bug
its users meet, not us, so the package is checked strictly, for the oldest
Python nsqpy supports.
"""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls

SRC = Path(__file__).resolve().parents[2] / "src"  # run there, mypy checks this checkout's files


def test_the_client_passes_mypy_strict(tmp_path):
    command = [sys.executable, "-m", "mypy", "--python-version", "3.11", "--strict", "--follow-imports=silent",
               "--cache-dir", str(tmp_path), "-p", "nsqpy.client"]
    result = subprocess.run(command, cwd=SRC, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(command[1:])} (in src/):\n{result.stdout}{result.stderr}"
