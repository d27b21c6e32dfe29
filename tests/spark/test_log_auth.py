"""The log reader through nsqd's AUTH, against a real auth server: with
``--auth-http-address`` a retained topic's messages are read only with a
secret that may subscribe to it, given as the ``auth_secret`` option (to
the Spark source and to ``nsq_to_parquet``), which appears in no plan and
no output."""

import urllib.parse

import pytest

from tests.support.auth_server import AuthServer, grant
from tests.support.wire import http

from .conftest import archive_command, committed_bodies
from .test_log_reader import log_options, retain

pytestmark = pytest.mark.spark

SECRET = "s3cr3t-9f2c"  # looks like nothing Spark or nsqd would print of its own
PAYROLL = [b"payroll %d" % i for i in range(40)]


@pytest.fixture
def guarded(start_nsqd, topic):
    """nsqd with AUTH and ``topic`` retained, holding PAYROLL; the auth
    server grants SECRET a subscription to ``topic`` only."""
    server = AuthServer()
    server.grants[SECRET] = grant(topic=f"^{topic}$", permissions=("subscribe",), identity="payroll-job")
    server.grants["other"] = grant(topic="^public$", permissions=("subscribe",), identity="canteen")
    try:
        nsqd = start_nsqd(f"--auth-http-address={server.address}")
        retain(nsqd, topic)
        for body in PAYROLL:  # HTTP publishing stays open under AUTH, as in NSQ
            assert http("POST", f"{nsqd.http_url}/pub?topic={urllib.parse.quote(topic)}", body)[0] == 200
        yield nsqd
    finally:
        server.stop()


def test_the_log_reader_reads_with_a_secret_that_may_subscribe(spark, guarded, topic):
    read = spark.read.format("nsq").options(**log_options(guarded, topic))
    with pytest.raises(Exception, match=r"refused reading .*401 AUTH_FIRST.*give the secret as option auth_secret"):
        read.load().collect()
    with pytest.raises(Exception, match=r"refused reading .*403 UNAUTHORIZED"):
        read.option("auth_secret", "other").load().collect()
    frame = read.option("auth_secret", SECRET).load()
    assert sorted(row.body for row in frame.collect()) == sorted(PAYROLL)
    plans = frame._jdf.queryExecution().toString()  # every stage, as explain(extended=True) prints them
    assert "BatchScan nsq" in plans and SECRET not in plans


def test_nsq_to_parquet_archives_with_the_secret_and_never_prints_it(guarded, topic, tmp_path, archiver):
    out = tmp_path / "out"
    refused = archiver(archive_command(guarded, topic, out, "--available-now"))
    assert refused.wait(300) != 0
    assert "give the secret as option auth_secret" in refused.output, refused.output[-3000:]
    running = archiver(archive_command(guarded, topic, out, "--available-now", f"--option=auth_secret={SECRET}"))
    assert running.wait(300) == 0, running.output[-3000:]
    assert sorted(committed_bodies(out)) == sorted(PAYROLL)
    assert SECRET not in running.output
