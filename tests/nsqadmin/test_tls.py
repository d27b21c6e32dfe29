"""nsqadmin reaching nsqd over HTTPS with its --http-client-tls-* options:
the CA that signed nsqd's certificate, a client certificate when nsqd
requires one, or no verification when asked."""

import pytest

from tests.nsqadmin.helpers import call
from tests.support.certs import make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def https_nsqd(start_nsqd, certs):
    """An nsqd whose HTTPS API asks for a client certificate signed by the test CA."""
    nsqd = start_nsqd(f"--tls-cert={certs.server_cert}", f"--tls-key={certs.server_key}",
                      f"--tls-root-ca-file={certs.ca}", "--tls-client-auth-policy=require-verify")
    nsqd.wait_for_log("HTTPS: listening on")
    return nsqd


def test_https_nsqd_with_ca_and_client_certificate(start_admin, https_nsqd, certs, topic):
    url = f"https://{https_nsqd.addresses['HTTPS']}"
    admin = start_admin(f"--nsqd-http-address={url}", f"--http-client-tls-root-ca-file={certs.ca}",
                        f"--http-client-tls-cert={certs.client_cert}", f"--http-client-tls-key={certs.client_key}",
                        "--history-interval=0")
    assert call(admin, "POST", "/api/topics", {"topic": topic})[0] == 200
    status, answer = call(admin, "GET", "/api/topics")
    assert (status, answer) == (200, {"topics": [topic], "message": ""})


def test_https_nsqd_refused_without_its_ca_or_certificate(start_admin, https_nsqd, certs):
    url = f"https://{https_nsqd.addresses['HTTPS']}"
    unverified = start_admin(f"--nsqd-http-address={url}", "--history-interval=0")
    status, answer = call(unverified, "GET", "/api/nodes")
    assert status == 502 and answer["message"].startswith("UPSTREAM_ERROR: ") and "certificate" in answer["message"]

    no_client_cert = start_admin(f"--nsqd-http-address={url}", "--http-client-tls-insecure-skip-verify",
                                 "--history-interval=0")
    assert call(no_client_cert, "GET", "/api/nodes")[0] == 502
