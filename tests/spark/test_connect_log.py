"""What ``nsqpy spark-connect-server`` prints while a client runs a query:
the address it listens on, and Spark's warnings and errors, not its INFO
log (over three hundred lines for one client's query at Spark's default
level), through the log4j2 configuration nsqpy ships with the command."""

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

CLIENT = """
import sys
from nsqpy.spark.session import build_session
spark = build_session(sys.argv[1])
print(spark.range(1000).selectExpr("sum(id)").first()[0])
spark.stop()
"""
#: the JVM's notice of its incubator modules, the server's two lines (starting, and its address), and a
#: line or two that do not come from Spark (nsqpy's own notice of a module changed since it was compiled)
MOST_LINES = 6


def test_a_client_query_leaves_a_few_lines_and_no_info_in_the_server_output(connect_server):
    client = subprocess.run([sys.executable, "-c", CLIENT, connect_server.url], capture_output=True, text=True,
                            timeout=180)
    assert client.returncode == 0, client.stderr[-3000:]
    assert client.stdout.split() == ["499500"]

    server = connect_server.process
    server.stop()  # its shutdown is part of what it prints
    server.wait(30)
    info = [line for line in server.lines if " INFO " in line and " SparkConnectServer: " not in line]
    assert info == [] and len(server.lines) <= MOST_LINES, server.output[-6000:]
