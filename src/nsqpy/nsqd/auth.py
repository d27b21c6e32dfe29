"""AUTH: ask an auth server what a secret may do, and check it later.

The server gets ``secret``, ``remote_ip``, ``tls`` and ``common_name``
(GET query, sorted; or with ``--auth-http-request-method=post`` a JSON body
of one-item lists) and answers ``{"ttl", "identity", "identity_url",
"authorizations": [{"topic", "channels", "permissions"}]}``. Regexes match
anywhere in the name, as Go's MatchString; a publish checks the empty
channel name, so a publish grant needs a channel regex matching "".

A TCP connection keeps its answer until the ttl passes; HTTP requests that
hand out message content (http_log.ContentAuth) have no connection to keep
it on, and share answers through a GrantCache.
"""

import json
import random
import re
import time
from collections import OrderedDict
from dataclasses import dataclass

from ..net import client_tls_context

PERMISSIONS = {"subscribe", "publish"}
NSQ_ACCEPT = {"Accept": "application/vnd.nsq; version=1.0"}
REFUSALS = (401, 403)  # an auth server's "not this secret", as opposed to its failure
MAX_GRANTS = 1024  # answers a GrantCache keeps: what a client inventing secrets can cost


class AuthError(Exception):
    """No auth server gave a usable answer (details go to the log only)."""


class AuthRefused(AuthError):
    """An auth server answered, and refused the secret (401 or 403). TCP
    treats it as any AuthError (NSQ's E_AUTH_FAILED); HTTP tells the two
    apart, so that a reader retries an auth server that is down but not a
    secret that is wrong."""


@dataclass(frozen=True)
class Authorization:
    topic: re.Pattern
    channels: tuple[re.Pattern, ...]
    permissions: frozenset

    def allows(self, permission: str, topic: str, channel: str) -> bool:
        return (permission in self.permissions and self.topic.search(topic) is not None
                and any(c.search(channel) is not None for c in self.channels))

    def allows_some_channel(self, permission: str, topic: str) -> bool:
        """``permission`` on ``topic`` for at least one channel (a grant that
        names a channel pattern at all)."""
        return permission in self.permissions and self.topic.search(topic) is not None and bool(self.channels)


@dataclass(frozen=True)
class AuthState:
    identity: str
    identity_url: str
    authorizations: tuple[Authorization, ...]
    expires_at: float  # time.monotonic()

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.expires_at

    def allows(self, permission: str, topic: str, channel: str) -> bool:
        return any(a.allows(permission, topic, channel) for a in self.authorizations)

    def allows_some_channel(self, permission: str, topic: str) -> bool:
        return any(a.allows_some_channel(permission, topic) for a in self.authorizations)


def parse_answer(data: dict) -> AuthState:
    """Raise ValueError for anything NSQ rejects: ttl <= 0, an unknown
    permission, a regex that does not compile."""
    ttl = data.get("ttl")
    if not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or ttl <= 0:
        raise ValueError(f"invalid ttl {ttl!r}")
    authorizations = []
    for entry in data.get("authorizations") or []:
        permissions = frozenset(entry.get("permissions") or [])
        if not permissions <= PERMISSIONS:
            raise ValueError(f"unknown permissions {sorted(permissions - PERMISSIONS)}")
        try:
            topic = re.compile(entry.get("topic", ""))
            channels = tuple(re.compile(c) for c in entry.get("channels") or [])
        except re.error as error:
            raise ValueError(f"bad regex: {error}") from None
        authorizations.append(Authorization(topic, channels, permissions))
    return AuthState(str(data.get("identity", "")), str(data.get("identity_url", "")), tuple(authorizations),
                     time.monotonic() + ttl)


class AuthClient:
    def __init__(self, addresses: list[str], method: str, connect_timeout: float, request_timeout: float, log,
                 root_ca_file: str = ""):
        import aiohttp  # only a daemon with --auth-http-address loads it, and only here

        self.urls = [a if "://" in a else f"http://{a}/auth" for a in addresses]
        self.method = method
        self.timeout = aiohttp.ClientTimeout(total=request_timeout, connect=connect_timeout)
        self.log = log
        # an HTTPS auth server is verified against --tls-root-ca-file when given
        self.ssl = client_tls_context(root_ca_file) if root_ca_file else None

    async def query(self, secret: str, remote_ip: str, tls: bool, common_name: str) -> AuthState:
        import urllib.parse  # as aiohttp: only a daemon that asks an auth server needs it

        import aiohttp
        params = {"common_name": common_name, "remote_ip": remote_ip, "secret": secret,
                  "tls": "true" if tls else "false"}
        start = random.randrange(len(self.urls))
        connector = aiohttp.TCPConnector(ssl=self.ssl) if self.ssl is not None else None
        refused = False
        async with aiohttp.ClientSession(timeout=self.timeout, connector=connector) as session:
            for url in self.urls[start:] + self.urls[:start]:
                try:
                    status, body = await self._ask(session, url, params)
                    https_port = _https_port(body) if status == 403 and url.startswith("http://") else None
                    if https_port is not None:  # an auth server that requires TLS names its HTTPS port, as nsqd's does
                        parts = urllib.parse.urlsplit(url)
                        url = parts._replace(scheme="https", netloc=f"{parts.hostname}:{https_port}").geturl()
                        status, body = await self._ask(session, url, params)
                    if status != 200:
                        refused = refused or status in REFUSALS
                        raise ValueError(f"status {status}")
                    return parse_answer(json.loads(body))
                except (aiohttp.ClientError, TimeoutError, ValueError, TypeError, AttributeError, KeyError) as error:
                    self.log.error("AUTH: %s failed: %s", url, error)
        if refused:
            raise AuthRefused("the auth server refused the secret")
        raise AuthError("no auth server answered")

    async def _ask(self, session: "aiohttp.ClientSession", url: str, params: dict) -> tuple[int, bytes]:
        import urllib.parse

        if self.method == "post":
            request = session.post(url, json={k: [v] for k, v in params.items()}, headers=NSQ_ACCEPT)
        else:
            request = session.get(f"{url}?{urllib.parse.urlencode(sorted(params.items()))}", headers=NSQ_ACCEPT)
        async with request as response:
            return response.status, await response.read()


def _https_port(body: bytes):
    """The ``https_port`` of a 403 ``TLS_REQUIRED`` answer; None for any
    other 403 (a refused secret)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    return answer.get("https_port") if isinstance(answer, dict) else None


class GrantCache:
    """Auth servers' answers for HTTP requests, each kept until its ttl
    passes, as a TCP connection keeps its own: a log reader asks
    ``/topic/read`` many times a second and must not cost the auth server a
    request each time. Keyed by everything nsqd sends (the answer may depend
    on the address or the certificate as well as the secret); at most
    MAX_GRANTS answers, the oldest dropped first. Only answers are kept: a
    failure or a refusal is asked again next time."""

    def __init__(self, client: AuthClient):
        self.client = client
        self._states: OrderedDict[tuple, AuthState] = OrderedDict()

    async def query(self, secret: str, remote_ip: str, tls: bool, common_name: str) -> AuthState:
        key = (secret, remote_ip, tls, common_name)
        state = self._states.get(key)
        if state is not None and not state.expired:
            return state
        state = await self.client.query(secret, remote_ip, tls, common_name)
        self._states[key] = state
        self._states.move_to_end(key)
        while len(self._states) > MAX_GRANTS:
            self._states.popitem(last=False)
        return state


def peer_common_name(ssl_object) -> str:
    """Subject CN of a client's verified TLS certificate ("" without one), for the auth server."""
    certificate = ssl_object.getpeercert() if ssl_object is not None else None
    for rdn in (certificate or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return ""
