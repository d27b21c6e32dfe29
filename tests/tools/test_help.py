"""``--help`` of every console script: exit 0, no traceback, and each flag's
default at the end of its help in the shape NSQ's Go programs print it
(``(default 30s)``, ``(default "text")``, nothing for an empty or false one)."""

import pathlib
import subprocess
import sys
import tomllib

import pytest

PYPROJECT = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"
SCRIPTS = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]  # name -> "module:main"

# phrases each help holds, whitespace collapsed (argparse wraps to the terminal)
SHOWN = {
    "nsqd": ["default duration to wait before auto-requeing a message (default 1m0s)",
             "prefix used for keys sent to statsd (%s for host replacement) (default \"nsq.%s\")",
             "enable snappy feature negotiation (client compression) (default true)",
             "(default \"0.0.0.0:4150\")", "(default 250ms)", "(default 10000)"],
    "nsqlookupd": ["remain tombstoned if registration remains (default 45s)", "(default \"0.0.0.0:4161\")",
                   "log message prefix (default \"[nsqlookupd] \")"],
    "nsqadmin": ["(default \"0.0.0.0:4171\")", "URL base path (default \"/\")", "(default \"stats.gauges.%s\")"],
    "nsq_tail": ["max number of messages to allow in flight (default 200)"],
    "nsq_stat": ["duration of time between polling/printing output (default 2s)"],
    "nsq_to_file": ["sync file to disk every duration (default 30s)", "nsq channel (default \"nsq_to_file\")",
                    "how frequently the topic list should be refreshed (default 1m0s)",
                    "(default \"<TOPIC>.<HOST><REV>.<DATETIME>.log\")", "9=BestCompression) (default 6)"],
    "to_nsq": ["character to split input from stdin (default \"\\n\")"],
    "nsq_to_http": ["% of messages to publish (float b/w 0 -> 1) (default 1)",
                    "'%s' will be printf replaced with data",
                    "the Content-Type used for POST requests (default \"application/octet-stream\")",
                    "timeout for HTTP request (default 20s)"],
    "nsq_to_nsq": ["epsilon-greedy (default \"hostpool\")", "0 disables (default 250)"],
    "nsq_to_parquet": ["(default \"local[*]\")", "seconds between status lines (default 10)"],
    "nsqpy": ["cluster"],
}
# zero values Go's flag package leaves out, and one empty flag of each kind per tool
ZERO_NOTES = ["(default 0)", "(default \"\")", "(default false)", "(default 0s)", "(default [])", "(default None)"]
NOT_SHOWN = {
    "nsq_to_file": ["gzip output files. (default", "rotate the file every duration (default",
                    "nsq topic (may be given multiple times) (default", "place of hostname. <SHORT_HOST> and "
                    "<HOSTNAME> are valid replacement tokens (default"],
    "nsqd": ["path to store disk-backed messages (default"],
}


def help_text(module: str, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, timeout=60)
    output = (result.stdout + result.stderr).decode()
    assert result.returncode == 0 and "Traceback" not in output, output
    return " ".join(result.stdout.decode().split())


def test_every_console_script_is_covered():
    assert set(SHOWN) == set(SCRIPTS)
    assert all(target.startswith(f"nsqpy.cli.{name}:") for name, target in SCRIPTS.items())


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_shows_defaults_as_go_does(script):
    text = help_text(SCRIPTS[script].split(":")[0], "--help")
    for phrase in SHOWN[script]:
        assert phrase in text, f"{phrase!r} missing from {script} --help:\n{text}"
    for phrase in ZERO_NOTES + NOT_SHOWN.get(script, []):
        assert phrase not in text, f"{phrase!r} in {script} --help:\n{text}"


@pytest.mark.parametrize("flag", ["-h", "-help", "--help"])
def test_nsq_to_http_help_in_every_spelling(flag):
    assert "(default \"nsq_to_http\")" in help_text("nsqpy.cli.nsq_to_http", flag)


def test_nsqpy_cluster_help():
    text = help_text("nsqpy.cli.nsqpy", "cluster", "--help")
    assert "how many nsqd nodes (default 1)" in text and "(default \"127.0.0.1\")" in text
