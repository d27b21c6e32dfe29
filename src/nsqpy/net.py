"""Listening sockets from NSQ-style addresses, with errors an operator can act on."""

import asyncio
import errno
import functools
import os
import socket


class ListenError(Exception):
    """One line saying which listener failed and what to do about it."""


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port``, ``:port`` or ``[v6]:port`` -> (host, port); a port
    above 65535 is refused (the kernel would silently take it modulo 65536)."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"{address!r} is not host:port")
    if not port.isdigit():
        raise ValueError(f"{address!r}: port {port!r} is not a number")
    if int(port) > 65535:
        raise ValueError(f"{address!r}: port {port} is out of range (0-65535)")
    host = host.strip("[]")
    return host, int(port)


def peer_host_port(address: str) -> tuple[str, int]:
    """A peer to reach: ``host:port`` with both parts, or ValueError naming the value."""
    host, port = split_host_port(address)
    if not host:
        raise ValueError(f"{address!r} names no host")
    return host, port


def is_unix_address(address: str) -> bool:
    """A listen address is a unix socket's path when it has a ``/``, or no
    ``:`` at all (``nsqd.sock``, a path to NSQ too). Anything else is
    host:port: ``127.0.0.1:notaport`` is a bad port to refuse, not the name
    of a socket file to create (NSQ refuses it too, as an unknown port)."""
    return "/" in address or ":" not in address


@functools.cache
def listen_backlog() -> int:
    """The system's maximum accept queue (``net.core.somaxconn``), which Go
    asks for on every listener: a burst of connects then waits in the queue
    instead of in SYN retransmits."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return max(int(f.read()), 1)
    except (OSError, ValueError):
        return socket.SOMAXCONN


async def serve_tcp(protocol_factory, sock: socket.socket):
    """An asyncio server on a listening socket, keeping its full backlog
    (``create_server`` would otherwise listen again with 100)."""
    return await asyncio.get_running_loop().create_server(protocol_factory, sock=sock, backlog=listen_backlog())


def listen(address: str, what: str, flag: str) -> socket.socket:
    """A bound, listening socket for ``address``. ``what`` names the listener
    (``TCP``, ``HTTP``) and ``flag`` the option that sets it, for the error."""
    try:
        if is_unix_address(address):
            if os.path.exists(address):
                os.unlink(address)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(address)
        else:
            try:
                host, port = split_host_port(address)
            except ValueError as error:
                raise ListenError(f"{what}: {error}; check {flag} (a unix socket's path has a /)") from None
            infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            family, kind, proto, _, sockaddr = infos[0]
            sock = socket.socket(family, kind, proto)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
        sock.listen(listen_backlog())
        sock.setblocking(False)
        return sock
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            hint = f"address already in use; stop the other process or choose another {flag}"
        elif error.errno == errno.EACCES:
            hint = f"permission denied; choose a port above 1023 with {flag}"
        else:
            hint = f"{error.strerror or error}; check {flag}"
        raise ListenError(f"{what}: listen ({address}) failed: {hint}") from None


def bound_address(sock: socket.socket) -> str:
    """``ip:port`` actually bound (port 0 becomes the ephemeral port), or the path."""
    name = sock.getsockname()
    if isinstance(name, tuple):
        host = name[0]
        return f"[{host}]:{name[1]}" if ":" in host else f"{host}:{name[1]}"
    return name


def bound_port(sock: socket.socket) -> int:
    name = sock.getsockname()
    return name[1] if isinstance(name, tuple) else -1


async def close_listeners(tcp_server, http_api) -> None:
    """Stop accepting TCP connections and stop the HTTP API (either may be None)."""
    if tcp_server is not None:
        tcp_server.close()
    if http_api is not None:
        await http_api.stop()


def client_tls_context(ca_file: str = "", cert: str = "", key: str = "", skip_verify: bool = False):
    """An ``ssl.SSLContext`` for dialling a daemon: verify it against
    ``ca_file`` (or the system CAs) and the host dialled unless
    ``skip_verify``; present ``cert``/``key`` when given.

    Certificates are checked as Go's crypto/x509 checks them, on every
    Python: Python 3.13's default context adds OpenSSL's strict mode, which
    refuses a certificate without an Authority Key Identifier (a self-signed
    one, or one from an older CA) that Go's nsqd and go-nsq accept; an NSQ
    deployment's certificates keep working when its programs are nsqpy's."""
    import ssl  # only programs that speak TLS pay for it

    context = ssl.create_default_context(cafile=ca_file or None)
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    if cert:
        context.load_cert_chain(cert, key)
    if skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
