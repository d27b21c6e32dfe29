"""The shared pieces on their own: destination choice, go-nsq option names,
file name templates, nsq_stat's rates."""

import socket

import pytest

from nsqpy.tools.app import ToolError
from nsqpy.tools.archive_file import FileSettings, filename_template, with_rev
from nsqpy.tools.clientopts import client_config
from nsqpy.tools.hostpool import FIRST_REST, EpsilonGreedy, HostPool, RoundRobin, selector
from nsqpy.tools.nsq_stat import ChannelFigures, report_line


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_round_robin_ignores_failures():
    pool = RoundRobin(["a", "b", "c"])
    picks = []
    for _ in range(6):
        picks.append(pool.pick())
        pool.mark(picks[-1], False)
    assert picks == ["a", "b", "c", "a", "b", "c"]


def test_hostpool_rests_a_failed_host_then_retries_it():
    clock = Clock()
    pool = HostPool(["a", "b"], clock)
    pool.mark("a", False)
    assert {pool.pick() for _ in range(4)} == {"b"}
    clock.now += FIRST_REST + 1
    assert {pool.pick() for _ in range(4)} == {"a", "b"}
    pool.mark("a", False)  # a second failure in a row rests it twice as long
    clock.now += FIRST_REST + 1
    assert {pool.pick() for _ in range(4)} == {"b"}
    pool.mark("b", False)
    assert {pool.pick() for _ in range(4)} == {"a", "b"}  # all resting: try them all


def test_epsilon_greedy_prefers_the_fastest_and_explores():
    draws = iter([0.5, 0.5, 0.5, 0.5, 0.05, 0.2])  # one draw a pick; exploring takes a second
    pool = EpsilonGreedy(["slow", "fast"], Clock(), rng=lambda: next(draws))
    assert pool.pick() == "slow"  # untried first
    pool.mark("slow", True, 0.5)
    assert pool.pick() == "fast"
    pool.mark("fast", True, 0.01)
    assert [pool.pick(), pool.pick()] == ["fast", "fast"]
    assert pool.pick() == "slow"  # 0.05 < 10%: explore, 0.2 picks the first healthy host


def test_unknown_mode_means_every_destination():
    assert selector("all", ["a"]) is None and selector("nonsense", ["a"]) is None
    assert isinstance(selector("hostpool", ["a"]), HostPool)


def test_go_nsq_option_names_and_values():
    config = client_config("ua", "consumer-opt", ["max_requeue_delay,2m", "snappy", "deflate,false",
                                                  "lookupd_poll_jitter,0.5", "output_buffer_timeout,-1",
                                                  "max_in_flight,7", "sample_rate,10", "user_agent,mine"],
                           max_in_flight=3)
    assert config.max_requeue_delay == 120 and config.snappy and not config.deflate
    assert config.lookupd_poll_jitter == 0.5 and config.output_buffer_timeout == -1
    assert config.max_in_flight == 3  # --max-in-flight wins, as in NSQ's tools
    assert config.sample_rate == 10 and config.user_agent == "mine"
    with pytest.raises(ToolError, match="tls_min_version: go-nsq option not supported"):
        client_config("ua", "producer-opt", ["tls_min_version,tls1.2"])
    with pytest.raises(ToolError, match="snappy: invalid boolean 'maybe'"):
        client_config("ua", "producer-opt", ["snappy,maybe"])


def test_filename_templates_as_nsq_builds_them():
    plain = FileSettings("/out", "/out", "%Y")
    host = socket.gethostname().split(".")[0]
    assert filename_template("<TOPIC>.<HOST><REV>.<DATETIME>.log", "t", "", plain) == f"t.{host}.<DATETIME>.log"
    gz = FileSettings("/out", "/work", "%Y", gzip=True)
    template = filename_template("<TOPIC>.<HOST><REV>.<PID>.log", "t", "id-<SHORT_HOST>", gz)
    assert template.startswith(f"t.id-{host}<REV>.") and template.endswith(".log.gz")
    assert with_rev(template, 12).startswith(f"t.id-{host}-000012.")
    with pytest.raises(ValueError, match="missing <REV>"):
        filename_template("<TOPIC>.log", "t", "", FileSettings("/out", "/out", "%Y", rotate_size=10))


def test_stat_rates_per_second_over_the_interval():
    before = ChannelFigures(depth=100, messages=1000)
    now = ChannelFigures(depth=40, backend_depth=10, in_flight=5, messages=1200, clients=2)
    assert report_line(now, before, 2.0).split() == ["100", "130", "|", "40", "30", "10", "5", "0", "|", "0", "0",
                                                     "1200", "2"]
