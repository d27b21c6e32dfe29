"""TLS in nsqd: the upgrade after IDENTIFY, --tls-required, client
certificates, and the HTTPS API. Certificates are made by the test run."""

import json
import socket
import ssl
import urllib.request

import pytest

from nsqpy.protocol import commands as cmd
from nsqpy.protocol.frames import MAGIC_V2, FrameReader
from tests.support.certs import make_certs
from tests.support.wire import WireConn, http, http_json

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def tls_flags(certs, *extra):
    return (f"--tls-cert={certs.server_cert}", f"--tls-key={certs.server_key}", *extra)


def client_context(certs, with_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs.ca)
    if with_cert:
        context.load_cert_chain(certs.client_cert, certs.client_key)
    return context


def receive(sock) -> bytes:
    data = sock.recv(65536)
    if not data:
        raise ConnectionError("closed by nsqd")
    return data


def upgraded(daemon, context, **identify) -> tuple[ssl.SSLSocket, FrameReader]:
    """IDENTIFY with tls_v1, read the plain answer, handshake, read the OK over TLS."""
    sock = socket.create_connection(daemon.tcp_hostport, timeout=15)
    sock.sendall(MAGIC_V2 + cmd.identify({"feature_negotiation": True, "tls_v1": True, **identify}))
    frames = FrameReader()
    while not (answer := frames.feed(receive(sock), limit=1)):
        pass
    assert json.loads(answer[0][1])["tls_v1"] is True
    assert frames.take_rest() == b""  # nothing plain after the answer
    tls = context.wrap_socket(sock, server_hostname="127.0.0.1")
    while not (ok := frames.feed(receive(tls))):
        pass
    assert ok == [(0, b"OK")]
    return tls, frames


def request(tls: ssl.SSLSocket, frames: FrameReader, command: bytes):
    tls.sendall(command)
    while not (got := frames.feed(receive(tls))):
        pass
    return got


def test_upgrade_publish_consume_and_stats_over_tls(start_nsqd, certs, topic):
    daemon = start_nsqd(*tls_flags(certs))
    tls, frames = upgraded(daemon, client_context(certs))
    assert request(tls, frames, cmd.pub(topic, b"secret")) == [(0, b"OK")]
    assert request(tls, frames, cmd.sub(topic, "ch")) == [(0, b"OK")]
    ((frame_type, payload),) = request(tls, frames, cmd.rdy(1))
    assert frame_type == 2 and payload.endswith(b"secret")
    _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
    client = stats["topics"][0]["channels"][0]["clients"][0]
    assert client["tls"] is True and client["tls_version"] in ("TLS1.2", "TLS1.3") and client["tls_cipher_suite"]
    tls.close()


def test_identify_without_a_certificate_says_tls_is_off(nsqd):
    with WireConn(nsqd.tcp_hostport) as c:
        assert c.identify(feature_negotiation=True, tls_v1=True)["tls_v1"] is False


def test_tls_required_refuses_plain_commands_and_plain_http(start_nsqd, certs, topic):
    daemon = start_nsqd(*tls_flags(certs, "--tls-required=true"))
    with WireConn(daemon.tcp_hostport) as c:
        c.send(cmd.pub(topic, b"in clear"))
        error = c.error()
        assert (error.code, error.description) == ("E_INVALID", "cannot PUB in current state (TLS required)")
        c.expect_closed()
    status, _, body = http("GET", f"{daemon.http_url}/ping")
    https_port = int(daemon.addresses["HTTPS"].rsplit(":", 1)[1])
    assert (status, json.loads(body)) == (403, {"message": "TLS_REQUIRED", "https_port": https_port})
    with urllib.request.urlopen(f"https://{daemon.addresses['HTTPS']}/ping", context=client_context(certs),
                                timeout=15) as response:
        assert response.read() == b"OK"
    tls, frames = upgraded(daemon, client_context(certs))
    assert request(tls, frames, cmd.pub(topic, b"over tls")) == [(0, b"OK")]
    tls.close()


def test_tcp_https_mode_keeps_plain_http(start_nsqd, certs):
    daemon = start_nsqd(*tls_flags(certs, "--tls-required=tcp-https"))
    assert http("GET", f"{daemon.http_url}/ping")[:3:2] == (200, b"OK")
    with WireConn(daemon.tcp_hostport) as c:
        c.send(cmd.NOP)
        assert c.error().description == "cannot NOP in current state (TLS required)"


def test_client_certificate_required(start_nsqd, certs, topic):
    daemon = start_nsqd(*tls_flags(certs, "--tls-client-auth-policy=require-verify",
                                   f"--tls-root-ca-file={certs.ca}"))
    tls, frames = upgraded(daemon, client_context(certs, with_cert=True))
    assert request(tls, frames, cmd.pub(topic, b"mutual")) == [(0, b"OK")]
    tls.close()
    with pytest.raises((ssl.SSLError, ConnectionError, AssertionError)):
        tls, frames = upgraded(daemon, client_context(certs))
        request(tls, frames, cmd.pub(topic, b"no cert"))  # TLS 1.3 reports the refusal on first use


def test_bad_tls_flags_are_one_line(tmp_path):
    import subprocess
    import sys
    for args, fragment in [(["--tls-cert=/nonexistent.pem"], "--tls-cert and --tls-key must be given together"),
                           (["--tls-required=true"], "--tls-required needs --tls-cert and --tls-key"),
                           (["--tls-cert=/no.pem", "--tls-key=/no.key"], "--tls-cert/--tls-key: cannot load")]:
        result = subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqd", f"--data-path={tmp_path}", *args],
                                capture_output=True, text=True, timeout=20)
        assert result.returncode == 1 and fragment in result.stderr, result.stderr


@pytest.mark.parametrize("features", [{}, {"snappy": True}, {"deflate": True}])
def test_our_client_over_tls(start_nsqd, certs, topic, features):
    import asyncio

    from nsqpy.client import Config, Consumer, Producer

    daemon = start_nsqd(*tls_flags(certs, "--tls-client-auth-policy=require-verify", f"--tls-root-ca-file={certs.ca}",
                                   "--tls-required=tcp-https"))  # plain HTTP stays open for /stats
    config = Config(tls_v1=True, tls_root_ca_file=certs.ca, tls_cert=certs.client_cert, tls_key=certs.client_key,
                    max_in_flight=20, **features)
    received = []

    async def main():
        async with Producer(daemon.tcp_address, config) as producer:
            await producer.multi_publish(topic, [b"%d" % i * 50 for i in range(50)])

        async def handler(message):
            received.append(message.body)

        consumer = Consumer(topic, "ch", handler, config=config)
        await consumer.connect_to_nsqd(daemon.tcp_address)
        async with asyncio.timeout(30):
            while len(received) < 50:
                await asyncio.sleep(0.02)
        _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
        await consumer.stop()
        return stats["topics"][0]["channels"][0]["clients"][0]

    client = asyncio.run(main())
    assert sorted(received) == sorted(b"%d" % i * 50 for i in range(50))
    assert client["tls"] is True
    assert (client["snappy"], client["deflate"]) == (features.get("snappy", False), features.get("deflate", False))


def test_our_client_reports_a_failed_handshake(start_nsqd, certs, tmp_path):
    import asyncio

    from nsqpy.client import Config, ConnectionClosedError, Producer
    from tests.support.certs import make_certs

    daemon = start_nsqd(*tls_flags(certs))
    other_ca = make_certs(tmp_path).ca  # a CA that did not sign nsqd's certificate

    async def main():
        async with Producer(daemon.tcp_address, Config(tls_v1=True, tls_root_ca_file=other_ca)) as producer:
            await producer.publish("t", b"x")

    with pytest.raises(ConnectionClosedError) as error:
        asyncio.run(main())
    assert "TLS with nsqd" in str(error.value) and "CERTIFICATE_VERIFY_FAILED" in str(error.value)


def test_certificates_without_key_identifiers_are_accepted_as_go_accepts_them(start_nsqd, tmp_path, topic):
    """Certificates from a CA that sets no Authority Key Identifier: Go's
    nsqd and go-nsq accept them, and so do our client (which Python 3.13's
    default verification would refuse) and nsqd checking a client's."""
    import asyncio

    from nsqpy.client import Config, Producer

    old = make_certs(tmp_path, key_identifiers=False)
    daemon = start_nsqd(*tls_flags(old, "--tls-client-auth-policy=require-verify", f"--tls-root-ca-file={old.ca}",
                                   "--tls-required=tcp-https"))  # plain HTTP stays open for /stats
    config = Config(tls_v1=True, tls_root_ca_file=old.ca, tls_cert=old.client_cert, tls_key=old.client_key)

    async def main():
        async with Producer(daemon.tcp_address, config) as producer:
            await producer.publish(topic, b"accepted")

    asyncio.run(main())
    _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
    assert stats["topics"][0]["message_count"] == 1
