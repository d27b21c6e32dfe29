"""The ``start_tool`` fixture: utilities that outlive no test."""

import pytest

from tests.tools.helpers import ToolProcess


@pytest.fixture
def start_tool():
    """Start a utility (killed at teardown if still running)."""
    running = []

    def start(name: str, *args: str, **popen) -> ToolProcess:
        tool = ToolProcess(name, args, **popen)
        running.append(tool)
        return tool

    yield start
    for tool in running:
        tool.kill()
