"""The nsqlookupd daemon: a TCP listener for nsqd peers, an HTTP API for
consumers and operators, one registration database in memory."""

import logging
import socket

from ..errors import StartupError
from ..net import ListenError, bound_address, bound_port, close_listeners, listen, serve_tcp
from .options import NsqlookupdOptions
from .registry import RegistrationDB
from .tcp import LookupProtocol


class NSQLookupd:
    def __init__(self, options: NsqlookupdOptions, logger: logging.Logger | None = None, clock=None):
        try:
            options.validate()
        except ValueError as error:
            raise StartupError(str(error)) from None
        self.options = options
        self.log = logger or logging.getLogger("nsqlookupd")
        self.db = RegistrationDB(clock) if clock else RegistrationDB()
        self.hostname = socket.gethostname()
        self.tcp_port = 0
        self.http_port = 0
        self._tcp_server = None
        self._http = None

    async def start(self) -> None:
        """Both listeners are bound before either is announced (a busy port is
        refused first), and aiohttp loads only after the ``listening on``
        lines: a request that arrives meanwhile waits in the kernel's backlog."""
        options = self.options
        try:
            tcp_sock = listen(options.tcp_address, "TCP", "--tcp-address")
            try:
                http_sock = listen(options.http_address, "HTTP", "--http-address")
            except ListenError:
                tcp_sock.close()
                raise
            self._tcp_server = await serve_tcp(lambda: LookupProtocol(self), tcp_sock)
            self.tcp_port = bound_port(tcp_sock)
            self.http_port = bound_port(http_sock)
            self.log.info("TCP: listening on %s", bound_address(tcp_sock))
            self.log.info("HTTP: listening on %s", bound_address(http_sock))
            from .http import LookupHttpApi

            self._http = LookupHttpApi(self)
            await self._http.start(http_sock)
        except ListenError as error:
            await self.stop()
            raise StartupError(str(error)) from None

    async def stop(self) -> None:
        self.log.info("NSQLookupd: exiting")
        tcp_server, http_api, self._tcp_server, self._http = self._tcp_server, self._http, None, None
        await close_listeners(tcp_server, http_api)
