"""NSQ's own programs (../shared/reference, when it is there) and the
export that prepares a data directory for its nsqd."""

import subprocess
import sys
from pathlib import Path

GO_BIN = Path(__file__).resolve().parents[3] / "shared" / "reference" / "nsq-v1.3.0" / "bin"
GO_NSQD = GO_BIN / "nsqd"
GO_NSQ_TAIL = GO_BIN / "nsq_tail"


def export_for_go(data: Path) -> subprocess.CompletedProcess:
    """``nsqd --data-path=DATA --export-for-go``, its output kept."""
    return subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqd", f"--data-path={data}", "--export-for-go"],
                          capture_output=True, text=True, timeout=120)
