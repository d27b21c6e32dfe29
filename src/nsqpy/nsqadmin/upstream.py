"""HTTP calls from nsqadmin to nsqd and nsqlookupd, with the configured
connect and request timeouts and outbound TLS.

Every failure becomes an ``UpstreamError`` whose text is one line naming the
URL and the reason, because nsqadmin shows it to the operator as is (in a
``WARNING:`` or ``UPSTREAM_ERROR:`` message).
"""

import asyncio
import json
import ssl

import aiohttp

from ..net import client_tls_context

ACCEPT_V1 = {"Accept": "application/vnd.nsq; version=1.0"}


class UpstreamError(Exception):
    """``status`` is the daemon's HTTP status, or 0 when it did not answer;
    ``reason`` is what the daemon itself said (its JSON ``message``), for
    an answer that refused a value the operator gave."""

    def __init__(self, message: str, status: int = 0, reason: str = ""):
        super().__init__(message)
        self.status = status
        self.reason = reason or message


def daemon_reason(body: bytes) -> str:
    """nsqd and nsqlookupd refuse with ``{"message": "CODE detail"}``;
    anything else is taken as text."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("message"), str):
        return answer["message"]
    return body[:200].decode("utf-8", "replace").strip()


def daemon_url(address: str, path: str) -> str:
    """A daemon's address is ``host:port`` (plain HTTP, as NSQ assumes) or a full URL."""
    base = address if address.startswith(("http://", "https://")) else f"http://{address}"
    return base.rstrip("/") + path


def client_ssl_context(options) -> ssl.SSLContext | None:
    if not (options.http_client_tls_root_ca_file or options.http_client_tls_cert
            or options.http_client_tls_insecure_skip_verify):
        return None
    return client_tls_context(options.http_client_tls_root_ca_file, options.http_client_tls_cert,
                              options.http_client_tls_key, options.http_client_tls_insecure_skip_verify)


class Upstream:
    """One pooled aiohttp session for every daemon nsqadmin talks to."""

    def __init__(self, options):
        self.timeout = aiohttp.ClientTimeout(total=options.http_client_request_timeout,
                                             sock_connect=options.http_client_connect_timeout)
        self._ssl = client_ssl_context(options)
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=256, ssl=self._ssl if self._ssl is not None else True)
            self._session = aiohttp.ClientSession(timeout=self.timeout, connector=connector,
                                                  headers=ACCEPT_V1)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, url: str, *, params=None, data=None,
                      headers=None) -> tuple[int, bytes]:
        """-> (status, body) for a 2xx answer; UpstreamError for anything else."""
        try:
            async with self._open().request(method, url, params=params, data=data,
                                            headers=headers) as response:
                body = await response.read()
        except asyncio.TimeoutError:
            raise UpstreamError(f"{method} {url}: no answer within "
                                f"{self.timeout.total:g}s (--http-client-request-timeout)") from None
        except aiohttp.ClientError as error:
            raise UpstreamError(f"{method} {url}: {error or type(error).__name__}") from None
        if not 200 <= response.status < 300:
            text = body[:200].decode("utf-8", "replace").strip()
            raise UpstreamError(f"{method} {url}: got response {response.status} {text}", response.status,
                                daemon_reason(body))
        return response.status, body

    async def get_json(self, url: str, params=None):
        _, body = await self.request("GET", url, params=params)
        try:
            return json.loads(body)
        except ValueError:
            raise UpstreamError(f"GET {url}: answer is not JSON") from None

    async def post(self, address: str, path: str, **params) -> None:
        await self.request("POST", daemon_url(address, path), params=params)
