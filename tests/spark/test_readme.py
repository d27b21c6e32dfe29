"""The Spark page of the manual (docs/spark.md), run as printed: its Python
snippets and its ``nsq_to_parquet --available-now`` command, against a real
nsqlookupd and nsqd (on ephemeral ports: the page's addresses are swapped for
theirs)."""

import os
import re
import subprocess
import sys

import pytest

from tests.support.wire import http, http_json, wait_until

from .conftest import publish, wait_for_registration

# several JVM starts (or a standalone cluster) per test: minutes on a busy 2-core machine
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SPARK_PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "spark.md")
CONNECT = "sc://"  # a Connect client snippet: tests/spark/test_connect.py runs the same calls


def spark_section() -> str:
    with open(SPARK_PAGE) as f:
        text = f.read()
    start = text.index("# The data pipeline on Spark\n")  # the page's title: the whole page is the section
    return text[start:]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", spark_section(), re.S)


#: what the page says of its Python snippets
HOW_SNIPPETS_RUN = "Each snippet is a script of its own (those that use Spark start their own session)"


def run(code: str, cwd, addresses: dict, shell: bool = False) -> str:
    for printed, real in addresses.items():
        code = code.replace(printed, real)
    command = ["bash", "-c", code] if shell else [sys.executable, "-c", code]
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{code}\n---\n{result.stderr[-3000:]}"
    return result.stdout


def channels(nsqd, topic: str) -> list[str]:
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")
    return sorted(channel["channel_name"] for found in stats["topics"] for channel in found["channels"])


def test_the_page_says_how_its_snippets_run_and_each_is_a_script_of_its_own():
    """It said they ran "as one script", but the log reader's stopped the
    session the snippet after it used."""
    assert HOW_SNIPPETS_RUN in " ".join(spark_section().split())
    for block in blocks("python"):
        assert block.startswith(("import ", "from ")), block
        code = "\n".join(line.split("#")[0] for line in block.splitlines())
        assert "build_session(" in code or not re.search(r"(?<![.\w])spark\.", code), block  # its own session
        assert "spark.stop()" not in block.rstrip().removesuffix("spark.stop()"), block


def test_the_spark_snippets_run_as_printed_in_order(start_nsqd, start_lookupd, tmp_path):
    """The first snippet publishes the messages it reads, on a first run,
    and leaves no channel behind to pile up later messages."""
    lookupd = start_lookupd()
    nsqd = start_nsqd(f"--lookupd-tcp-address={lookupd.tcp_address}")
    addresses = {"127.0.0.1:4161": lookupd.http_address, "127.0.0.1:4150": nsqd.tcp_address,
                 "127.0.0.1:4151": nsqd.http_address, ".venv/bin/": os.path.dirname(sys.executable) + "/"}
    python = [block for block in blocks("python")
              if CONNECT not in block and '"clicks"' not in block and '"words"' not in block]
    read, write, read_archive = python
    # what the section says to do first: nsq_to_parquet's channel exists before messages arrive
    assert http("POST", f"{nsqd.http_url}/topic/create?topic=events")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/create?topic=events&channel=nsq_to_parquet")[0] == 200
    wait_for_registration(lookupd, "events", 1)

    assert "100 messages archived" in run(read, tmp_path, addresses)
    run(write, tmp_path, addresses)
    wait_until(lambda: channels(nsqd, "events") == ["nsq_to_parquet"])  # the snippet's own channel is gone
    archive_commands = [line for line in blocks("sh")[0].splitlines() if "--available-now" in line]
    assert len(archive_commands) == 1
    run(archive_commands[0], tmp_path, addresses, shell=True)
    assert "102 rows in the archive, 102 through pandas" in run(read_archive, tmp_path, addresses)


def test_the_log_reader_snippet_runs_as_printed(start_nsqd, start_lookupd, tmp_path):
    lookupd = start_lookupd()
    nsqd = start_nsqd(f"--lookupd-tcp-address={lookupd.tcp_address}")
    addresses = {"127.0.0.1:4161": lookupd.http_address, "127.0.0.1:4151": nsqd.http_address}
    (snippet,) = [block for block in blocks("python") if '"clicks"' in block]
    made = re.findall(r"`(curl -X POST\s+'[^`]*topic=clicks[^`]*')`", spark_section())
    assert len(made) == 2  # the topic, then its retention: nsqd answers 404 to the second without the first
    for command in made:
        run(" ".join(command.split()), tmp_path, addresses, shell=True)
    wait_for_registration(lookupd, "clicks", 1)
    publish(nsqd, "clicks", [b"click %d" % i for i in range(50)])
    printed = run(snippet, tmp_path, addresses)
    assert "50 clicks in the last 24 hours" in printed and "50 clicks archived" in printed



def test_the_keyed_sink_snippet_runs_as_printed_and_twice_publishes_once(start_nsqd, tmp_path):
    """Run twice (the second run as a rerun after a failure would be), its
    keys leave each message once on every topic it writes."""
    nsqd = start_nsqd()
    addresses = {"127.0.0.1:4150": nsqd.tcp_address, "127.0.0.1:4151": nsqd.http_address}
    (snippet,) = [block for block in blocks("python") if '"words"' in block]
    for _ in range(2):
        run(snippet, tmp_path, addresses)
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json")
    counts = {topic["topic_name"]: topic["message_count"] for topic in stats["topics"]}
    assert counts == {"words": 100, "shouts": 100, "orders": 1}
