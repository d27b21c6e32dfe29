"""AUTH against a real HTTP auth server: NSQ's parameters, permissions,
TTL re-checks, and NSQ's error codes."""

import asyncio
import json
import time

import pytest

from nsqpy.client import Config, ConnectionClosedError, Producer, ProtocolError
from nsqpy.protocol import commands as cmd
from tests.support.auth_server import AuthServer, grant
from tests.support.wire import WireConn, http_json

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls


@pytest.fixture
def auth_server():
    server = AuthServer()
    yield server
    server.stop()


def authed(daemon, secret: bytes) -> WireConn:
    c = WireConn(daemon.tcp_hostport)
    assert c.identify(feature_negotiation=True)["auth_required"] is True
    c.send(cmd.auth(secret))
    return c


def test_auth_grants_what_the_server_allows(start_nsqd, auth_server):
    auth_server.grants["s3cret"] = grant(topic="^allowed$", permissions=("publish",), identity="alice")
    daemon = start_nsqd(f"--auth-http-address={auth_server.address}")
    with authed(daemon, b"s3cret") as c:
        assert json.loads(c.response()) == {"identity": "alice", "identity_url": "https://example.invalid/alice",
                                            "permission_count": 1}
        c.publish("allowed", b"ok")
        c.send(cmd.pub("other", b"x"))
        error = c.error()
        assert (error.code, error.description) == ("E_UNAUTHORIZED", 'AUTH failed for PUB on "other" ""')
        c.expect_closed()
    (sent,) = auth_server.requests
    assert sent == {"method": "GET", "path": "/auth", "secret": "s3cret", "remote_ip": "127.0.0.1",
                    "tls": "false", "common_name": ""}
    with authed(daemon, b"s3cret") as c:
        c.response()
        c.send(cmd.sub("allowed", "ch"))  # publish only: no subscribe
        assert c.error().code == "E_UNAUTHORIZED"


def test_commands_before_auth_and_refused_secrets(start_nsqd, auth_server):
    auth_server.grants["empty"] = {"ttl": 60, "authorizations": []}
    daemon = start_nsqd(f"--auth-http-address={auth_server.address}", "--auth-http-request-method=post")
    with WireConn(daemon.tcp_hostport) as c:
        c.send(cmd.sub("t", "c"))
        error = c.error()
        assert (error.code, error.description) == ("E_AUTH_FIRST", "AUTH required before SUB")
    with authed(daemon, b"wrong") as c:  # the server answers 403
        assert c.error().code == "E_AUTH_FAILED"
    with authed(daemon, b"empty") as c:
        error = c.error()
        assert (error.code, error.description) == ("E_UNAUTHORIZED", "AUTH no authorizations found")
    assert auth_server.requests[-1]["method"] == "POST"


def test_auth_server_down_fails_closed(start_nsqd):
    daemon = start_nsqd("--auth-http-address=127.0.0.1:1")
    with authed(daemon, b"anything") as c:
        error = c.error()
        assert (error.code, error.description) == ("E_AUTH_FAILED", "AUTH failed")
        c.expect_closed()


def test_expired_grants_are_checked_again(start_nsqd, auth_server, topic):
    # 3 s: the first PUB is still within the grant (no second request yet), on a busy machine too
    auth_server.grants["short"] = grant(ttl=3)
    daemon = start_nsqd(f"--auth-http-address={auth_server.address}")
    with authed(daemon, b"short") as c:
        c.response()
        granted = time.monotonic()
        c.publish(topic, b"first")
        auth_server.grants["short"] = grant(topic="^nothing$", ttl=3)  # revoked at the server
        time.sleep(max(0.0, granted + 3.2 - time.monotonic()))
        c.send(cmd.pub(topic, b"after expiry"))
        error = c.error()
        assert error.code == "E_UNAUTHORIZED"
    assert len(auth_server.requests) == 2


def test_our_client_authenticates_and_reports_refusals(start_nsqd, auth_server, topic):
    auth_server.grants["client"] = grant()
    daemon = start_nsqd(f"--auth-http-address={auth_server.address}")

    async def main():
        async with Producer(daemon.tcp_address, Config(auth_secret="client")) as producer:
            await producer.publish(topic, b"authed")
        with pytest.raises(ConnectionClosedError, match="requires AUTH"):
            await Producer(daemon.tcp_address).publish(topic, b"no secret")
        with pytest.raises(ProtocolError) as error:
            await Producer(daemon.tcp_address, Config(auth_secret="nope")).publish(topic, b"bad secret")
        assert error.value.code == "E_AUTH_FAILED"

    asyncio.run(main())
    _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
    assert stats["topics"][0]["message_count"] == 1


def test_https_auth_server_verified_with_the_root_ca_and_reached_through_a_403(start_nsqd, tmp_path):
    import ssl

    from tests.support.certs import make_certs

    certs = make_certs(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    https = AuthServer(tls_context=context)
    https.grants["over-https"] = grant()
    https_port = int(https.address.rsplit(":", 1)[1])
    plain = AuthServer(redirect_to_https_port=https_port)  # says: ask me over HTTPS on that port
    try:
        daemon = start_nsqd(f"--auth-http-address={plain.address}", f"--tls-root-ca-file={certs.ca}")
        with authed(daemon, b"over-https") as c:
            assert json.loads(c.response())["identity"] == "tester"
        assert [r["secret"] for r in https.requests] == ["over-https"]
    finally:
        https.stop()
        plain.stop()
