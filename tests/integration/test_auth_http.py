"""AUTH on the HTTP routes that hand out message content (a retained
topic's ``/topic/read``, ``/channel/deferred?body=true``), against a real
auth server: the secret as ``Authorization: Bearer``, NSQ's permission for
a SUB, 401/403/503 in one line, grants kept for their TTL, the routes NSQ
left open still open, and HTTPS with client certificates around it all."""

import json
import ssl
import time
import urllib.error
import urllib.request

import pytest

from tests.retention import logreader
from tests.support.auth_server import AuthServer, grant
from tests.support.certs import make_certs
from tests.support.wire import http, wait_until

PAYROLL = b"secret payroll data"


@pytest.fixture
def auth_server():
    server = AuthServer()
    yield server
    server.stop()


def get(url: str, secret: str | None = None, context: ssl.SSLContext | None = None, scheme: str = "Bearer"):
    """-> (status, headers, body) of a GET, the secret sent as nsqd asks."""
    headers = {"Authorization": f"{scheme} {secret}"} if secret is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=15,
                                    context=context) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def refusal(answer) -> tuple[int, str]:
    """(status, message) of a refused request, checking it says nothing else."""
    status, _, body = answer
    assert PAYROLL not in body
    message = json.loads(body)["message"]
    assert "\n" not in message
    return status, message


def bodies(answer) -> list[bytes]:
    status, _, data = answer
    assert status == 200, data
    return [body for _, _, _, body in logreader.decode(data)]


def publish(url: str, topic: str, body: bytes, query: str = "") -> None:
    status, _, answer = http("POST", f"{url}/pub?topic={topic}{query}", body)  # open, as in NSQ
    assert (status, answer) == (200, b"OK")


def test_the_issue_reproduction_a_secret_reads_only_what_it_may_subscribe_to(start_nsqd, auth_server):
    auth_server.grants["reader"] = grant(topic="^public$", permissions=("subscribe",), identity="reader")
    auth_server.grants["publisher"] = grant(topic=".*", channels=("",), permissions=("publish",))
    auth_server.grants["nothing"] = {"ttl": 60, "authorizations": []}
    nsqd = start_nsqd(f"--auth-http-address={auth_server.address}", "--retention=24h")
    url = nsqd.http_url
    publish(url, "private", PAYROLL)
    publish(url, "public", b"the canteen menu")

    status, message = refusal(answer := get(f"{url}/topic/read?topic=private&from=0"))
    assert (status, message.split()[0]) == (401, "AUTH_FIRST") and "Authorization: Bearer" in message
    assert answer[1]["WWW-Authenticate"] == 'Bearer realm="nsqd"'
    assert refusal(get(f"{url}/topic/read?topic=private&from=0", "reader", scheme="Basic"))[0] == 401
    assert refusal(get(f"{url}/topic/read?topic=private&from=0", "reader")) == (
        403, 'UNAUTHORIZED AUTH failed for /topic/read on "private"')
    assert bodies(get(f"{url}/topic/read?topic=public&from=0", "reader")) == [b"the canteen menu"]
    assert refusal(get(f"{url}/topic/read?topic=public&from=0", "publisher"))[0] == 403  # publish is not subscribe
    assert refusal(get(f"{url}/topic/read?topic=public&from=0", "nothing")) == (
        403, "UNAUTHORIZED AUTH no authorizations found")
    assert refusal(get(f"{url}/topic/read?topic=public&from=0", "wrong")) == (  # the auth server answers 403
        403, "UNAUTHORIZED AUTH refused by the auth server")

    asked = [r for r in auth_server.requests if r["secret"] == "reader"]
    assert asked == [{"method": "GET", "path": "/auth", "secret": "reader", "remote_ip": "127.0.0.1",
                      "tls": "false", "common_name": ""}]  # the grant is kept for its ttl: asked once
    for route in ("/topic/offsets?topic=private", "/stats?format=json", "/ping", "/info"):
        assert get(f"{url}{route}")[0] == 200, route  # no message content: open, as NSQ's HTTP API
    assert http("POST", f"{url}/topic/create?topic=another")[0] == 200


def test_grants_are_asked_again_once_their_ttl_passed(start_nsqd, auth_server):
    auth_server.grants["brief"] = grant(topic="^public$", ttl=1)
    nsqd = start_nsqd(f"--auth-http-address={auth_server.address}", "--retention=24h")
    publish(nsqd.http_url, "public", b"menu")
    read = f"{nsqd.http_url}/topic/read?topic=public&from=0"
    assert bodies(get(read, "brief")) == [b"menu"]
    auth_server.grants["brief"] = grant(topic="^elsewhere$", ttl=1)  # revoked; nsqd may keep the old one 1 s
    time.sleep(1.2)
    assert refusal(get(read, "brief"))[0] == 403
    assert len([r for r in auth_server.requests if r["secret"] == "brief"]) == 2


def test_deferred_bodies_need_a_subscribe_grant_for_that_channel(start_nsqd, auth_server):
    auth_server.grants["auditor"] = grant(topic="^private$", channels=("^audit$",), permissions=("subscribe",))
    nsqd = start_nsqd(f"--auth-http-address={auth_server.address}")
    url = nsqd.http_url
    assert http("POST", f"{url}/topic/create?topic=private")[0] == 200
    for channel in ("audit", "payroll"):
        assert http("POST", f"{url}/channel/create?topic=private&channel={channel}")[0] == 200
    publish(url, "private", PAYROLL, "&defer=600000")

    listing = f"{url}/channel/deferred?topic=private&channel=%s&body=true"
    assert refusal(get(listing % "audit"))[0] == 401
    assert refusal(get(listing % "payroll", "auditor")) == (
        403, 'UNAUTHORIZED AUTH failed for /channel/deferred on "private" "payroll"')
    status, _, data = get(listing % "audit", "auditor")
    assert status == 200 and [m["body"] for m in json.loads(data)["messages"]] == ["c2VjcmV0IHBheXJvbGwgZGF0YQ=="]
    status, _, data = get(f"{url}/channel/deferred?topic=private&channel=payroll")  # sizes only: open as /stats
    assert status == 200 and [m["body_size"] for m in json.loads(data)["messages"]] == [len(PAYROLL)]
    assert "body" not in json.loads(data)["messages"][0]


def test_auth_server_down_refuses_reads_with_503(start_nsqd, auth_server):
    auth_server.grants["broken"] = 500
    nsqd = start_nsqd("--auth-http-address=127.0.0.1:1", f"--auth-http-address={auth_server.address}",
                      "--retention=24h")
    publish(nsqd.http_url, "private", PAYROLL)
    read = f"{nsqd.http_url}/topic/read?topic=private&from=0"
    assert refusal(get(read))[0] == 401  # no secret: nothing to ask
    assert refusal(get(read, "broken")) == (503, "AUTH_FAILED no auth server answered")  # 500, and port 1 refuses
    auth_server.stop()
    assert refusal(get(read, "anything")) == (503, "AUTH_FAILED no auth server answered")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def tls_context(certs, with_cert: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs.ca)
    if with_cert:
        context.load_cert_chain(certs.client_cert, certs.client_key)
    return context


def mutual_tls_nsqd(start_nsqd, certs, *extra: str):
    """-> (nsqd, its HTTPS URL) with client certificates required."""
    nsqd = start_nsqd(f"--tls-cert={certs.server_cert}", f"--tls-key={certs.server_key}",
                      "--tls-client-auth-policy=require-verify", f"--tls-root-ca-file={certs.ca}",
                      "--retention=24h", *extra)
    return nsqd, f"https://{wait_until(lambda: nsqd.addresses.get('HTTPS'))}"  # its line may follow HTTP's


def test_client_certificates_guard_reads_as_every_other_route(start_nsqd, certs):
    nsqd, https = mutual_tls_nsqd(start_nsqd, certs)
    request = urllib.request.Request(f"{https}/pub?topic=private", data=PAYROLL, method="POST")
    with urllib.request.urlopen(request, timeout=15, context=tls_context(certs, with_cert=True)) as response:
        assert response.read() == b"OK"
    read = "/topic/read?topic=private&from=0"
    assert refusal(get(f"{nsqd.http_url}{read}"))[1] == "TLS_REQUIRED"  # plain HTTP: 403, as for /stats
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
        get(f"{https}{read}", context=tls_context(certs, with_cert=False))
    assert bodies(get(f"{https}{read}", context=tls_context(certs, with_cert=True))) == [PAYROLL]


def test_https_reads_send_the_auth_server_the_certificates_name(start_nsqd, certs, auth_server):
    auth_server.grants["reader"] = grant(topic="^private$", permissions=("subscribe",))
    _, https = mutual_tls_nsqd(start_nsqd, certs, f"--auth-http-address={auth_server.address}")
    mutual = tls_context(certs, with_cert=True)
    request = urllib.request.Request(f"{https}/pub?topic=private", data=PAYROLL, method="POST")
    with urllib.request.urlopen(request, timeout=15, context=mutual) as response:
        assert response.read() == b"OK"
    read = f"{https}/topic/read?topic=private&from=0"
    assert refusal(get(read, context=mutual))[0] == 401  # a certificate is not a secret
    assert bodies(get(read, "reader", context=mutual)) == [PAYROLL]
    (asked,) = auth_server.requests
    assert (asked["tls"], asked["common_name"], asked["remote_ip"]) == ("true", "client", "127.0.0.1")
