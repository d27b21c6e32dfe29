"""The nsqadmin daemon: one HTTP listener serving the pages, the JSON API
and the static assets; the stats history sampler; the outbound HTTP client
they share."""

import logging
import os
import ssl
from importlib import resources

from ..errors import StartupError
from ..httpapi import new_app, serve
from ..metrics import daemon_registry, metrics_endpoint
from ..net import ListenError, bound_address, bound_port, listen
from .api import AdminApi, upstream_failures
from .cluster import ClusterInfo
from .departed import ClearedDepartures
from .graphite import Graphite
from .history import StatsHistory
from .notify import Notifier
from .options import NsqadminOptions
from .pages import Pages
from .upstream import Upstream

STATIC_DIR = resources.files("nsqpy.nsqadmin") / "static"


class NSQAdmin:
    def __init__(self, options: NsqadminOptions, logger: logging.Logger | None = None):
        try:
            options.validate()
        except ValueError as error:
            raise StartupError(str(error)) from None
        self.options = options
        self.log = logger or logging.getLogger("nsqadmin")
        try:
            self.upstream = Upstream(options)
        except (OSError, ssl.SSLError) as error:
            raise StartupError(f"HTTP client TLS: cannot load certificates: {error}; check "
                               "--http-client-tls-root-ca-file, --http-client-tls-cert and "
                               "--http-client-tls-key") from None
        static_dir = options.dev_static_dir or str(STATIC_DIR)
        if not os.path.isdir(static_dir):
            raise StartupError(f"--dev-static-dir {static_dir}: not a directory")
        self.static_dir = static_dir
        self.cluster = ClusterInfo(options, self.upstream)
        self.history = StatsHistory(self.cluster, options.history_interval, options.history_retention, self.log)
        self.notifier = Notifier(options.notification_http_endpoint, self.upstream, options.hostname, self.log)
        self.graphite = Graphite(options, self.upstream)
        self.cleared = ClearedDepartures()  # departed nodes an operator cleared from the nodes page
        self.http_port = 0
        self.http_address = ""
        self._runner = None

    def build_app(self):
        app = new_app(self.log)
        app.middlewares.append(upstream_failures)
        base = self.options.base_path
        app.add_routes(AdminApi(self).routes(base))
        app.add_routes(Pages(self).routes())
        app.router.add_static(f"{base}/static", self.static_dir)
        app.router.add_get(f"{base}/metrics", metrics_endpoint(daemon_registry("nsqadmin")), allow_head=False)
        if self.options.proxy_graphite:
            app.router.add_get(f"{base}/render", self.graphite.proxy_render, allow_head=False)
        return app

    async def start(self) -> None:
        try:
            sock = listen(self.options.http_address, "HTTP", "--http-address")
        except ListenError as error:
            await self.upstream.close()
            raise StartupError(str(error)) from None
        self.http_port = bound_port(sock)
        self.http_address = bound_address(sock)
        self._runner = await serve(self.build_app(), sock)
        self.log.info("HTTP: listening on %s", self.http_address)
        self.history.start()

    async def stop(self) -> None:
        self.log.info("NSQAdmin: exiting")
        await self.history.stop()
        await self.notifier.flush(timeout=2.0)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.upstream.close()
