"""etcd's v3 API through its JSON gateway, with aiohttp.

Why the gateway and not a client library: every etcd since 3.3 serves it
on the client port (``/v3/kv/range``, ``/v3/lease/grant``...), aiohttp is
already what nsqd's HTTP side runs on, and the Python gRPC clients for
etcd v3 are either unmaintained (python-etcd3 pins an old protobuf) or
synchronous (etcd3gw, on requests). The handful of calls replication
needs (leases, put, range, one compare-and-put transaction) are a page.

Keys and values travel base64-encoded, int64 fields as strings; both
are hidden here: keys and values are ``str``, numbers are ``int``.
"""

import asyncio
import base64
import json
import logging

import aiohttp


class EtcdUnavailable(Exception):
    """No endpoint answered (or every one answered with an error)."""


def _describe(error: Exception) -> str:
    """What went wrong, in words: some errors' text is empty or a lone
    bracket (a disconnect in the middle of an answer)."""
    text = str(error).strip()
    return text if any(c.isalpha() for c in text) else type(error).__name__


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def _text(b64: str) -> str:
    return base64.b64decode(b64).decode()


def _prefix_end(prefix: str) -> str:
    """etcd's range end for every key starting with ``prefix``."""
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return base64.b64encode(bytes(raw)).decode("ascii")


class Etcd:
    def __init__(self, endpoints: list[str], timeout: float = 2.0, log: logging.Logger | None = None):
        self.endpoints = [e if "://" in e else f"http://{e}" for e in endpoints]
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.log = log or logging.getLogger("nsqd")
        self._session: aiohttp.ClientSession | None = None
        self._preferred = 0  # the endpoint that answered last

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, path: str, body: dict) -> dict:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        errors = []
        count = len(self.endpoints)
        for step in range(count):
            index = (self._preferred + step) % count
            url = self.endpoints[index] + path
            try:
                async with self._session.post(url, data=json.dumps(body)) as response:
                    answer = await response.json(content_type=None)
                    if response.status != 200:
                        raise EtcdUnavailable(f"{url}: {response.status} {answer.get('message') or answer}")
                    self._preferred = index
                    return answer
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
                errors.append(f"{url}: {_describe(error)}")
            except EtcdUnavailable as error:
                errors.append(str(error))
        raise EtcdUnavailable("; ".join(errors))

    # --- leases -------------------------------------------------------------------------------

    async def grant(self, ttl: int) -> tuple[int, int]:
        """A new lease: -> (its id, its TTL as etcd counts it, which may
        be longer than asked for)."""
        answer = await self._call("/v3/lease/grant", {"TTL": ttl})
        return int(answer["ID"]), int(answer.get("TTL", ttl))

    async def keep_alive(self, lease: int) -> int:
        """One renewal. -> the lease's TTL now; 0 when it has expired."""
        answer = await self._call("/v3/lease/keepalive", {"ID": lease})
        return int(answer.get("result", {}).get("TTL", 0))

    async def time_to_live(self, lease: int) -> int:
        """The lease's remaining seconds (rounded down); -1 once it has ended
        (the gateway leaves a 0 out: a live lease with under a second left)."""
        answer = await self._call("/v3/lease/timetolive", {"ID": lease})
        return int(answer.get("TTL", 0))

    async def revoke(self, lease: int) -> None:
        try:
            await self._call("/v3/lease/revoke", {"ID": lease})
        except EtcdUnavailable as error:
            if "not found" not in str(error):
                raise

    # --- keys ---------------------------------------------------------------------------------

    async def put(self, key: str, value: str, lease: int = 0) -> None:
        body: dict = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = lease
        await self._call("/v3/kv/put", body)

    async def get(self, key: str) -> str | None:
        answer = await self._call("/v3/kv/range", {"key": _b64(key)})
        kvs = answer.get("kvs") or []
        return _text(kvs[0].get("value", "")) if kvs else None

    async def get_prefix(self, prefix: str) -> dict[str, str]:
        answer = await self._call("/v3/kv/range", {"key": _b64(prefix), "range_end": _prefix_end(prefix)})
        return {_text(kv["key"]): _text(kv.get("value", "")) for kv in answer.get("kvs") or []}

    async def delete(self, key: str) -> None:
        await self._call("/v3/kv/deleterange", {"key": _b64(key)})

    async def create(self, key: str, value: str, lease: int = 0) -> tuple[bool, str]:
        """Put ``key`` only if it does not exist: the one decision that many
        may race for. -> (created, the value the key holds now)."""
        holders = await self.create_all({key: value}, lease)
        return (True, value) if holders is None else (False, holders.get(key, ""))

    async def create_all(self, values: dict[str, str], lease: int = 0) -> dict[str, str] | None:
        """Put every key of ``values`` only if none of them exists, in one
        transaction: an identity made of several names is claimed whole or
        not at all. -> None when created, else what those keys that
        exist hold."""
        puts = []
        for key, value in values.items():
            put: dict = {"key": _b64(key), "value": _b64(value)}
            if lease:
                put["lease"] = lease
            puts.append({"request_put": put})
        answer = await self._call("/v3/kv/txn", {
            "compare": [{"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
                        for key in values],
            "success": puts,
            "failure": [{"request_range": {"key": _b64(key)}} for key in values],
        })
        return None if answer.get("succeeded") else self._found(answer)

    async def replace(self, key: str, expected: str, value: str) -> tuple[bool, str]:
        """Put ``value`` only if ``key`` still holds ``expected``: a
        decision taken again once what it named is gone, by one of those
        who race for it. -> (replaced, the value the key holds now)."""
        key64 = _b64(key)
        answer = await self._call("/v3/kv/txn", {
            "compare": [{"key": key64, "target": "VALUE", "result": "EQUAL", "value": _b64(expected)}],
            "success": [{"request_put": {"key": key64, "value": _b64(value)}}],
            "failure": [{"request_range": {"key": key64}}],
        })
        if answer.get("succeeded"):
            return True, value
        return False, self._found(answer).get(key, "")

    @staticmethod
    def _found(answer: dict) -> dict[str, str]:
        """The keys and values a failed transaction's ranges read."""
        return {_text(kv["key"]): _text(kv.get("value", ""))
                for response in answer.get("responses") or []
                for kv in response.get("response_range", {}).get("kvs") or []}
