"""What every utility shares: --version, NSQ's flag checks, go-nsq option
names, and one clear line (no traceback) for what an operator can fix."""

import importlib

import pytest

from nsqpy.protocol.names import RULE
from tests.tools.helpers import channel_stats, eventually, publish, run_tool

CONSUMERS = ["nsq_tail", "nsq_to_file", "nsq_to_http", "nsq_to_nsq"]
TOOLS = CONSUMERS + ["nsq_stat", "to_nsq"]
ENOUGH = {"nsq_to_http": ["--post=http://127.0.0.1:9/"], "nsq_to_nsq": ["--destination-nsqd-tcp-address=127.0.0.1:9"]}


def run_in_process(capsys, tool: str, *args: str):
    """The entry point called as the console script calls it (checks need no subprocess)."""
    code = importlib.import_module(f"nsqpy.cli.{tool}").main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(result) -> str:
    code, text = (result.returncode, result.stderr.decode()) if hasattr(result, "returncode") else result
    assert code == 1, text
    errors = [line for line in text.splitlines() if not line.startswith("[")]  # not an INFO log line
    assert "Traceback" not in text and len(errors) == 1, text
    return errors[0]


@pytest.mark.parametrize("tool", TOOLS)
def test_version_in_nsq_shape(tool, capsys):
    for flag in ("--version", "-version"):
        code, out, _ = run_in_process(capsys, tool, flag)
        assert code == 0
        assert out.startswith(f"{tool} v1.3.0 (built w/python3.")


@pytest.mark.parametrize("tool", CONSUMERS)
def test_nsqd_or_lookupd_but_not_both(tool, capsys):
    neither = run_in_process(capsys, tool, "--topic=t", *ENOUGH.get(tool, []))[::2]
    assert "--nsqd-tcp-address or --lookupd-http-address required" in one_line_error(neither)
    both = run_in_process(capsys, tool, "--topic=t", "--nsqd-tcp-address=127.0.0.1:9",
                          "-lookupd-http-address", "127.0.0.1:9", *ENOUGH.get(tool, []))[::2]
    assert "use --nsqd-tcp-address or --lookupd-http-address not both" in one_line_error(both)


@pytest.mark.parametrize("tool,args", [
    ("nsq_tail", ["--topic=t"]),
    ("nsq_to_file", ["--topic=t", "--output-dir=/tmp"]),
    ("nsq_to_http", ["--topic=t", "--post=http://127.0.0.1:9/"]),
    ("nsq_to_nsq", ["--topic=t", "--destination-nsqd-tcp-address=127.0.0.1:9"]),
])
def test_unreachable_nsqd_is_one_line(tool, args):
    result = run_tool(tool, *args, "--nsqd-tcp-address=127.0.0.1:9")
    assert "cannot connect to nsqd at 127.0.0.1:9" in one_line_error(result)


def test_unreachable_lookupd_is_one_line():
    result = run_tool("nsq_tail", "--topic=t", "--lookupd-http-address=127.0.0.1:9")
    assert "no nsqlookupd reachable (127.0.0.1:9:" in one_line_error(result)


@pytest.mark.parametrize("tool,args", [
    ("nsq_tail", ["--topic=t"]),
    ("to_nsq", ["--topic=t"]),
])
def test_nsqds_http_port_given_for_its_tcp_port_is_named_in_one_line(nsqd, tool, args):
    result = run_tool(tool, *args, f"--nsqd-tcp-address={nsqd.http_address}", stdin=b"one\n")
    line = one_line_error(result)
    assert "E_BAD_BODY" not in result.stderr.decode() and "invalid frame size" not in result.stderr.decode()
    assert (f"{nsqd.http_address} closed: it answers in HTTP, so this looks like an HTTP port (nsqd's "
            "--http-address); give its TCP port (--tcp-address, 4150 by default)") in line


def test_a_tcp_port_given_for_lookupds_http_port_is_named_in_one_line(start_lookupd):
    lookupd = start_lookupd()
    result = run_tool("nsq_tail", "--topic=t", f"--lookupd-http-address={lookupd.tcp_address}")
    assert one_line_error(result) == (
        f"nsq_tail: no nsqlookupd reachable ({lookupd.tcp_address}: it answers in NSQ's TCP protocol, not HTTP: "
        "this looks like a TCP port; give nsqlookupd's HTTP port (its --http-address, 4161 by default))")


@pytest.mark.parametrize("tool,args,message", [
    ("to_nsq", ["--nsqd-tcp-address=127.0.0.1:9"], "--topic required"),
    ("to_nsq", ["--topic=t"], "--nsqd-tcp-address required"),
    ("to_nsq", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--delimiter=ab"], "--delimiter must be a single byte"),
    ("nsq_stat", ["--topic=t", "--nsqd-http-address=127.0.0.1:9"], "--topic and --channel are required"),
    ("nsq_stat", ["--topic=t", "--channel=c", "--nsqd-http-address=http://127.0.0.1:9"],
     "--nsqd-http-address error - address should not contain scheme"),
    ("nsq_stat", ["--topic=t", "--channel=c", "--nsqd-http-address=127.0.0.1:9", "--count=-1"],
     "--count should be positive"),
    ("nsq_to_http", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9"], "--get or --post required"),
    ("nsq_to_http", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--get=http://x/"],
     "invalid GET address - must be a printf string"),
    ("nsq_to_http", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--post=http://x/", "--header=nope"],
     "--header value format should be 'key=value'"),
    ("nsq_to_http", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--get=http://x/%s", "--content-type=a/b"],
     "--content-type only used with --post"),
    ("nsq_to_http", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--post=http://x/", "--sample=2"],
     "--sample must be between 0.0 and 1.0"),
    ("nsq_to_nsq", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9"], "--destination-nsqd-tcp-address required"),
    ("nsq_to_file", ["--nsqd-tcp-address=127.0.0.1:9"], "--topic or --topic-pattern required"),
    ("nsq_to_file", ["--topic-pattern=x", "--nsqd-tcp-address=127.0.0.1:9"],
     "--lookupd-http-address must be specified when no --topic specified"),
    ("nsq_to_file", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--gzip-level=0"],
     "invalid --gzip-level value (0), should be 1-9"),
    ("nsq_to_file", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--gzip", "--filename-format=<TOPIC>.log"],
     "missing <REV> in --filename-format when gzip, rotation, or work dir enabled"),
    ("nsq_to_file", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--output-dir=/etc/passwd/archive"],
     "--output-dir /etc/passwd/archive is not writable: Not a directory"),
    ("nsq_tail", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--consumer-opt=no_such_option,1"],
     "--consumer-opt no_such_option: unknown option"),
    ("nsq_tail", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--consumer-opt=msg_timeout,30"],
     "--consumer-opt msg_timeout: invalid duration '30'"),
    ("nsq_tail", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--consumer-opt=max_attempts,70000"],
     "--consumer-opt: max_attempts must be in [0, 65535]"),
])
def test_bad_flags_are_one_line(tool, args, message, capsys):
    assert message in one_line_error(run_in_process(capsys, tool, *args)[::2])


@pytest.mark.parametrize("tool,args,refused", [
    ("nsq_tail", ["--topic=bad topic", "--nsqd-tcp-address=127.0.0.1:9"], "--topic 'bad topic'"),
    ("to_nsq", ["--topic=bad topic", "--nsqd-tcp-address=127.0.0.1:9"], "--topic 'bad topic'"),
    ("nsq_to_file", ["--topic=t", "--channel=bad/channel", "--nsqd-tcp-address=127.0.0.1:9", "--output-dir=/tmp"],
     "--channel 'bad/channel'"),
    ("nsq_to_http", ["--topic=" + "x" * 65, "--nsqd-tcp-address=127.0.0.1:9", "--post=http://127.0.0.1:9/"],
     f"--topic '{'x' * 65}'"),
    ("nsq_to_nsq", ["--topic=t", "--nsqd-tcp-address=127.0.0.1:9", "--destination-nsqd-tcp-address=a:1",
                    "--destination-topic=bad/name"], "--destination-topic 'bad/name'"),
])
def test_a_bad_topic_or_channel_name_is_the_same_usage_error_in_every_tool(tool, args, refused, capsys):
    """A name no run could use is a usage error, exit code 2 as for a bad
    flag, whichever tool it is given to (nsq_tail said 1 where to_nsq said 2)."""
    code, _, err = run_in_process(capsys, tool, *args)
    assert code == 2, err
    assert err.strip().splitlines() == [f"{tool}: {refused} is invalid ({RULE})"], err


def test_go_flag_styles_and_consumer_opts_reach_nsqd(nsqd, topic, start_tool):
    """-flag v, --flag=v, bare booleans; go-nsq option names land in IDENTIFY."""
    publish(nsqd, topic, [b"one"])
    tail = start_tool("nsq_tail", "-topic", topic, f"--nsqd-tcp-address={nsqd.tcp_address}", "-channel", "c",
                      "--consumer-opt=client_id,tail-test", "--consumer-opt", "msg_timeout,45s", "--print-topic")
    tail.wait_for_log("connected to")
    client = eventually(lambda: (channel_stats(nsqd, topic, "c").get("clients") or [None])[0])
    assert client["client_id"] == "tail-test"
    assert client["user_agent"].startswith("nsq_tail/1.3.0 nsqpy/")
    eventually(lambda: tail.stdout == f"{topic} | one\n".encode())
    assert tail.stop() == 0


ADDRESSED = {  # a tool's flags but one address flag, that flag, and the example its error gives
    "nsq_tail": (["--topic=t"], "--nsqd-tcp-address", "127.0.0.1:4150"),
    "nsq_to_file": (["--topic=t", "--output-dir=/tmp"], "--nsqd-tcp-address", "127.0.0.1:4150"),
    "nsq_to_http": (["--topic=t", "--post=http://127.0.0.1:9/"], "--lookupd-http-address", "127.0.0.1:4161"),
    "nsq_to_nsq": (["--topic=t", "--nsqd-tcp-address=127.0.0.1:9"], "--destination-nsqd-tcp-address",
                   "127.0.0.1:4150"),
    "nsq_stat": (["--topic=t", "--channel=c"], "--nsqd-http-address", "127.0.0.1:4151"),
    "to_nsq": (["--topic=t"], "--nsqd-tcp-address", "127.0.0.1:4150"),
}


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "'127.0.0.1' is not host:port"),
    ("127.0.0.1:99999", "'127.0.0.1:99999': port 99999 is out of range (0-65535)"),
    ("127.0.0.1:http", "'127.0.0.1:http': port 'http' is not a number"),
    (":4150", "':4150' names no host"),
])
def test_an_address_without_a_usable_host_and_port_is_one_line(tool, address, reason, capsys):
    """The example is an address of the kind the flag wants: nsqlookupd's HTTP
    port for --lookupd-http-address, never nsqd's TCP port."""
    args, flag, example = ADDRESSED[tool]
    code, _, err = run_in_process(capsys, tool, *args, f"{flag}={address}")
    assert code == 2, err
    assert err.strip().splitlines() == [f"{tool}: {flag}: {reason} (e.g. {example})"], err
