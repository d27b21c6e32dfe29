"""The nsqd daemon: lifecycle, the topic registry, and the background loops.

One event loop runs everything: TCP clients, the HTTP API, the queue scan
that times out in-flight messages and releases deferred ones, and the
periodic fsync of the disk queues.
"""

import asyncio
import logging
import os
import time

from ..diskqueue import DiskQueue
from ..diskqueue.synchold import SyncHold
from ..errors import StartupError
from ..net import ListenError, bound_address, bound_port, close_listeners, listen, serve_tcp
from ..protocol import NSQ_VERSION
from ..protocol import lookup as lookup_v1
from ..protocol import replication as replication_records
from ..protocol.identify import IdentifyPolicy
from ..protocol.names import is_ephemeral
from . import metadata, publishing, retention
from .auth import AuthClient
from .busypoll import BusyPoll
from .client import ClientV2
from .dirty import DirtyWriters
from .latency import LatencyWindow
from .lookup import LookupPeer
from .options import NsqdOptions
from .publish_keys import PublishKeys, keys_path
from .queue import MessageQueue, MessagesLost
from .replay import Replay, remove_stale_cursors
from .tls import server_context
from .tcp import V2Protocol
from .bounds import QueueFull
from .dead_letter import settle_interrupted
from .storage import lock_data_path, open_disk_queue
from .topic import Topic, TopicExiting
from .writes import Writes


NSQ_ACCEPT = {"Accept": "application/vnd.nsq; version=1.0"}
FIRST_REGISTRATION_WAIT = 0.5  # seconds the start waits, at most, for nsqlookupd to take our registrations


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


class NSQD:
    def __init__(self, options: NsqdOptions, logger: logging.Logger | None = None):
        try:
            options.validate()
            self.tls_context = server_context(options)
        except ValueError as error:
            raise StartupError(str(error)) from None
        self.options = options
        self.tls_required_tcp = options.tls_required != "false"
        self.log = logger or logging.getLogger("nsqd")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.data_path = options.data_path or os.getcwd()
        self.topics: dict[str, Topic] = {}
        self.timed_channels: set = set()  # channels with messages in flight or deferred (Channel keeps it)
        self.dirty = DirtyWriters(self)  # what each loop turn leaves for the disk (dirty.py)
        # durable mode: a keyed publish's fsyncs wait for its keys' write (diskqueue/synchold.py)
        self.sync_hold = SyncHold() if options.sync_every == 1 else None
        self.clients: dict[int, ClientV2] = {}
        self._next_client_id = 0
        self.start_time = int(time.time())
        self.health_error: str | None = None
        self.exiting = False
        self.lookup_peers: dict[str, LookupPeer] = {}
        self.identify_policy = IdentifyPolicy(
            version=NSQ_VERSION,
            max_rdy_count=options.max_rdy_count,
            max_heartbeat_interval=_ms(options.max_heartbeat_interval),
            max_output_buffer_size=options.max_output_buffer_size,
            default_output_buffer_timeout=_ms(options.output_buffer_timeout),
            min_output_buffer_timeout=_ms(options.min_output_buffer_timeout),
            max_output_buffer_timeout=_ms(options.max_output_buffer_timeout),
            default_msg_timeout=_ms(options.msg_timeout),
            max_msg_timeout=_ms(options.max_msg_timeout),
            max_deflate_level=options.max_deflate_level,
            snappy_enabled=options.snappy,
            deflate_enabled=options.deflate,
            tls_available=self.tls_context is not None,
            auth_required=bool(options.auth_http_addresses),
        )
        self.auth = AuthClient(options.auth_http_addresses, options.auth_http_request_method,
                               options.http_client_connect_timeout, options.http_client_request_timeout,
                               self.log, options.tls_root_ca_file) if options.auth_http_addresses else None
        self.tcp_address = ""
        self.http_address = ""
        self.tcp_port = 0
        self.http_port = 0
        self.https_port = 0
        self._tcp_server = None
        self._http = None
        self._lock_fd: int | None = None
        self._tasks: list[asyncio.Task] = []
        self._metadata = metadata.MetadataWriter(self.data_path, self.topics.values, self.log)
        self._loading = False
        self.replication = None  # a Replicator with --replication-factor above 1 (replication/)
        if options.replication_factor > 1:
            from .replication.replicator import Replicator

            self.replication = Replicator(self)

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.busy_poll = BusyPoll(self.loop, self.options.busy_poll)
        self.writes = Writes(self.loop, self.busy_poll, self.dirty.flush)
        self.log.info("ID: %d", self.options.node_id)
        self._lock_data_path()
        sockets: list = []
        try:
            # bind first: a busy port is the one line a person sees, before any loading
            tcp_sock, sites = self._listen_all()
            sockets = [tcp_sock, *(sock for _, sock, _ in sites)]
            self.tcp_address = bound_address(tcp_sock)
            self.tcp_port = bound_port(tcp_sock)
            self._load_metadata()
            retention.warn_of_unretained_logs(self)
            settle_interrupted(self)
            self._check_writable()
            # as NSQ's nsqd, registered with nsqlookupd by the time it says where it listens
            self.set_lookupd_addresses(self.options.nsqlookupd_tcp_addresses)
            await self._first_registrations()
            if self.replication is not None:
                await self._start_replication()
            self._tcp_server = await serve_tcp(lambda: V2Protocol(self), tcp_sock)
            self.log.info("TCP: listening on %s", self.tcp_address)
            for kind, sock, _ in sites:
                self.log.info("%s: listening on %s", kind, bound_address(sock))
            if sites:
                await self._serve_http(sites)
        except BaseException as error:
            await self._close_listeners()
            if self.replication is not None and self.replication.epoch:
                await self.replication.stop()
            for sock in sockets:
                sock.close()
            for peer in self.lookup_peers.values():
                await peer.stop()
            self._unlock_data_path()
            if isinstance(error, ListenError):
                raise StartupError(str(error)) from None
            raise
        self._tasks = [
            self.loop.create_task(self._queue_scan_loop()),
            self.loop.create_task(self._sync_loop()),
            self.loop.create_task(retention.retention_loop(self)),
        ]
        if self.options.statsd_address:
            from .statsd import StatsdPusher  # with the stats it sends: only a daemon that pushes them loads them

            self._tasks.append(self.loop.create_task(StatsdPusher(self).run()))

    async def _start_replication(self) -> None:
        node = f"{self.options.broadcast_address}:{self.options.broadcast_tcp_port or self.tcp_port}"
        try:
            await self.replication.start(node)
        except BaseException:
            await self.replication.stop()
            raise

    async def _first_registrations(self) -> None:
        """Give every nsqlookupd a moment to take our registrations (a
        millisecond on a LAN), so a client that asks it once our listening
        lines are out finds this nsqd. An unreachable one delays the start by
        ``FIRST_REGISTRATION_WAIT`` at most, and is retried as ever."""
        waits = [asyncio.ensure_future(peer.first_attempt.wait()) for peer in self.lookup_peers.values()]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=FIRST_REGISTRATION_WAIT)
            for wait in pending:
                wait.cancel()

    def _listen_all(self) -> tuple:
        """Bind every listener before announcing any, as NSQ does, so that a
        busy port is refused before a single ``listening on`` line. -> the
        TCP socket, and (kind, socket, SSL context or None) for HTTP and HTTPS."""
        options = self.options
        tcp_sock = listen(options.tcp_address, "TCP", "--tcp-address")
        sites = []
        try:
            if options.http_address:
                http_sock = listen(options.http_address, "HTTP", "--http-address")
                self.http_address = bound_address(http_sock)
                self.http_port = bound_port(http_sock)
                sites.append(("HTTP", http_sock, None))
            if options.https_address and self.tls_context is not None:
                https_sock = listen(options.https_address, "HTTPS", "--https-address")
                self.https_port = bound_port(https_sock)
                sites.append(("HTTPS", https_sock, self.tls_context))
        except BaseException:
            for sock in [tcp_sock, *(sock for _, sock, _ in sites)]:
                sock.close()
            raise
        return tcp_sock, sites

    async def _serve_http(self, sites: list) -> None:
        """The HTTP API on sockets that are already listening. aiohttp (a
        tenth of a second to import) loads only now, after the listening
        lines: a request that arrives meanwhile waits in the kernel's
        backlog and is answered as soon as the API is up."""
        from .http import HttpApi

        try:
            self._http = HttpApi(self)
            await self._http.start([(sock, context) for _, sock, context in sites])
        except BaseException:
            for _, sock, _ in sites:
                sock.close()
            raise

    async def stop(self) -> int:
        """Clean shutdown: stop listening, persist every message, release the
        lock. -> the exit status: 1 when acknowledged messages were lost."""
        if self.exiting:
            return 0
        self.exiting = True
        await self._close_listeners()
        for task in self._tasks:
            task.cancel()
        for peer in self.lookup_peers.values():
            await peer.stop()
        if self.replication is not None:
            await self.replication.stop()
        await self._metadata.close()
        self._persist_metadata()
        lost = None
        try:
            persisted = MessagesLost.tally([topic.close for topic in list(self.topics.values())])
        except MessagesLost as error:
            persisted, lost = error.persisted, error
        for client in list(self.clients.values()):
            client.close()
        await asyncio.sleep(0)  # let the transports report their closing
        self._unlock_data_path()
        if lost is not None:
            self.log.error("NSQ: persisted %d messages to %s; %s; exiting", persisted, self.data_path, lost)
            return 1
        self.log.info("NSQ: persisted %d messages to %s; exiting", persisted, self.data_path)
        return 0

    async def _close_listeners(self) -> None:
        tcp_server, http_api, self._tcp_server, self._http = self._tcp_server, self._http, None, None
        await close_listeners(tcp_server, http_api)

    def _lock_data_path(self) -> None:
        self._lock_fd = lock_data_path(self.data_path)

    def _check_writable(self) -> None:
        """Refuse to start where messages could be acknowledged and then not
        persisted: nsqd.dat is written now, as NSQ writes it at startup."""
        try:
            metadata.write(self.data_path, self.topics.values())
        except OSError as error:
            raise StartupError(f"--data-path {self.data_path} is not writable ({error.strerror or error}); "
                               "fix its permissions or choose another --data-path") from None

    def _unlock_data_path(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- metadata ------------------------------------------------------------------------

    def _load_metadata(self) -> None:
        try:
            entries = metadata.read(self.data_path, self.log)
        except ValueError as error:
            raise StartupError(str(error)) from None
        if self.options.replication_factor > 1:
            _refuse_retained_topics(entries)
        self._loading = True
        try:
            for topic_name, paused, expiry_settings, retention_settings, topic_limit, key_window, channels in entries:
                topic = self.get_topic(topic_name)
                topic.publish_key_window_setting = key_window
                topic.configure_expiry(**expiry_settings)
                topic.configure_retention(**retention_settings)
                topic.limit.configure(*topic_limit)
                for channel_name, channel_paused, dead_letter_settings, ttl, channel_limit in channels:
                    channel = topic.get_channel(channel_name)
                    channel.configure_dead_letter(**dead_letter_settings)
                    channel.limit.configure(*channel_limit)
                    if ttl is not None:
                        channel.configure_ttl(ttl)
                    if channel_paused:
                        channel.pause()
                    Replay.resume(channel)
                remove_stale_cursors(topic)
                if paused:
                    topic.pause()
                else:
                    topic.hand_out_log()
            restored = retention.unlisted_logs(self)
            for topic_name in restored:
                self.log.warning("TOPIC(%s): not in nsqd.dat, made again from its log (nsqd stopped before "
                                 "nsqd.dat listed it)", topic_name)
                topic = self.get_topic(topic_name)
                remove_stale_cursors(topic)
                topic.hand_out_log()
        finally:
            self._loading = False
        if restored:
            self.persist_metadata_soon()

    def notify_changed(self, topic: Topic, channel=None, deleted: bool = False) -> None:
        """A topic or channel was created or deleted: tell every nsqlookupd
        (ephemeral ones too, as NSQ does) and rewrite nsqd.dat soon."""
        name = channel.name if channel is not None else None
        command = lookup_v1.unregister(topic.name, name) if deleted else lookup_v1.register(topic.name, name)
        for peer in self.lookup_peers.values():
            peer.send(command)
        if self.replication is not None:
            self.replication.changed(topic.name, name, replication_records.DELETED if deleted
                                     else replication_records.CHANNEL)
        if not (topic.ephemeral or (channel is not None and channel.ephemeral)):
            self.persist_metadata_soon(topic)

    def persist_metadata_soon(self, changed: Topic | None = None) -> None:
        """Write the changes soon, with whatever else changes meanwhile, and
        wait for nothing: a PUB or SUB that creates its topic or channel is
        not held up by the disk (nor is it in NSQ). The HTTP API, which
        promises more, awaits ``persist_metadata()``. ``changed``: the topic
        whose entry changed (its channels included); None: any may have."""
        if not (self._loading or self.exiting):
            self._metadata.request(changed)

    def persist_metadata(self, changed: Topic | None = None) -> "asyncio.Future[bool]":
        """-> resolves once nsqd.dat holds every change made so far (True),
        or the write failed (False, logged). ``changed`` as above."""
        return self._metadata.request(changed)

    # --- nsqlookupd ----------------------------------------------------------------------

    @property
    def nsqlookupd_tcp_addresses(self) -> list[str]:
        return list(self.lookup_peers)

    def set_lookupd_addresses(self, addresses: list[str]) -> None:
        """Connect to new addresses and drop the ones no longer listed."""
        wanted = list(dict.fromkeys(addresses))
        for address in list(self.lookup_peers):
            if address not in wanted:
                self.log.info("LOOKUP(%s): removing peer", address)
                self.loop.create_task(self.lookup_peers.pop(address).stop())
        for address in wanted:
            if address not in self.lookup_peers:
                self.log.info("LOOKUP(%s): adding peer", address)
                peer = self.lookup_peers[address] = LookupPeer(self, address)
                peer.start()

    def registration_commands(self) -> list[bytes]:
        """What a (re)connected nsqlookupd must hear: every channel, and every
        topic that has none."""
        commands = []
        for topic in self.topics.values():
            if topic.channels:
                commands.extend(lookup_v1.register(topic.name, name) for name in topic.channels)
            else:
                commands.append(lookup_v1.register(topic.name))
        return commands

    def _persist_metadata(self) -> None:
        """The last write, at shutdown, once no write is under way."""
        try:
            metadata.write(self.data_path, self.topics.values())
        except OSError as error:
            self.log.error("failed to persist metadata: %s", error)

    # --- registry --------------------------------------------------------------------------

    def new_queue(self, name: str, ephemeral: bool) -> MessageQueue:
        return MessageQueue(self.options.mem_queue_size, None if ephemeral else self._open_disk(name))

    def read_log(self, topic: Topic, channel) -> None:
        """In durable mode a retained topic's channel reads the topic's log
        through a cursor (topiclog/cursor.py) instead of writing each message
        again to its own disk queue, which stays beside the cursor."""
        if (self.options.mem_queue_size or topic.topic_log is None or channel.ephemeral
                or channel.cursor is not None):
            return
        channel.read_log(retention.open_cursor(self, topic, channel.name, channel.queue.disk))

    def new_deferred_disk(self, name: str, ephemeral: bool) -> DiskQueue | None:
        """With --mem-queue-size=0 nothing acknowledged lives only in memory,
        deferred publishes included: they get a disk queue of their own."""
        if ephemeral or self.options.mem_queue_size:
            return None
        return self._open_disk(name, deferred=True)

    def _open_disk(self, name: str, deferred: bool = False) -> DiskQueue:
        disk = open_disk_queue(self.options, self.data_path, name, self.log, deferred=deferred)
        disk.on_dirty = self.dirty.mark
        disk.sync_hold = self.sync_hold
        return disk

    def open_topic_log(self, topic_name: str):
        return retention.open_topic_log(self, topic_name)

    @property
    def loading(self) -> bool:
        """Topics and channels are being made from nsqd.dat (at start)."""
        return self._loading

    def open_publish_keys(self, topic) -> PublishKeys:
        """A topic's keys (publish_keys.py), loaded from its file; written
        at the end of each turn with the disk queues' acknowledgements."""
        path = None if topic.ephemeral else keys_path(self.data_path, topic.name)
        keys = PublishKeys(topic.name, path, lambda: topic.publish_key_window, self.options.max_publish_keys,
                           sync=self.options.sync_every == 1)
        keys.on_pending = self.dirty.mark
        return keys

    def close_publish_keys(self, keys: PublishKeys) -> None:
        try:
            keys.close()
        except OSError as error:
            self.log.error("KEYS(%s): failed to write at shutdown: %s", keys.topic_name, error)

    def delete_publish_keys(self, topic) -> None:
        if topic.publish_keys is not None:
            topic.publish_keys.discard()
            topic.publish_keys = None
        if not topic.ephemeral:
            try:
                os.unlink(keys_path(self.data_path, topic.name))
            except FileNotFoundError:
                pass

    def close_topic_log(self, topic_log) -> None:
        """At shutdown: what waits is written and fsynced, or the loss is logged."""
        try:
            topic_log.close()
        except OSError as error:
            self.log.error("LOG(%s): failed to write at shutdown: %s", topic_log.name, error)

    def new_latency_window(self) -> LatencyWindow | None:
        options = self.options
        if not options.e2e_processing_latency_percentiles:
            return None
        return LatencyWindow(options.e2e_processing_latency_window_time, options.e2e_processing_latency_percentiles)

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            if self.exiting:
                raise TopicExiting("exiting")
            topic = self.topics[name] = Topic(name, self)
            self.log.info("TOPIC(%s): created", name)
            if not self._loading and not topic.ephemeral and self.lookup_peers:
                topic.started = False
                self.loop.create_task(self._start_with_lookupd_channels(topic))
            self.notify_changed(topic)
        return topic

    async def _start_with_lookupd_channels(self, topic: Topic) -> None:
        """Create the channels nsqlookupd knows for a new topic before its first
        message is handed out, so a channel that exists elsewhere in the cluster
        misses nothing published here."""
        try:
            addresses = [peer.http_address for peer in self.lookup_peers.values() if peer.http_address]
            if not addresses:
                self.log.error("TOPIC(%s): no nsqlookupd connected yet to ask for channels", topic.name)
            for name in await self._lookupd_channels(topic.name, addresses):
                if not topic.exiting and not is_ephemeral(name):
                    topic.get_channel(name)
        finally:
            topic.start()

    async def _lookupd_channels(self, topic_name: str, addresses: list[str]) -> set[str]:
        import aiohttp  # loaded by the HTTP API after startup; never on the way to listening

        options = self.options
        timeout = aiohttp.ClientTimeout(total=options.http_client_request_timeout,
                                        connect=options.http_client_connect_timeout)
        channels: set[str] = set()
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for address in addresses:
                url = f"http://{address}/channels"
                try:
                    async with session.get(url, params={"topic": topic_name}, headers=NSQ_ACCEPT) as response:
                        response.raise_for_status()
                        channels.update((await response.json(content_type=None))["channels"])
                except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError, TypeError) as error:
                    self.log.error("TOPIC(%s): failed to get channels from %s: %s", topic_name, url, error)
        return channels

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name)
        topic.delete()
        self.log.info("TOPIC(%s): deleted", name)
        self.notify_changed(topic, deleted=True)

    def publish_dead_letter(self, channel, message) -> bool:
        """A channel gives up on ``message`` (dead_letter.py): its body goes
        to the channel's dead-letter topic as a new message with the same id.
        False if that topic cannot take it now (exiting, disk refused): logged,
        and the channel delivers the message as usual."""
        name = channel.dead_letter_topic
        try:
            publishing.publish(self, name, [message.body], ids=[message.id])
        except (TopicExiting, QueueFull, OSError) as error:
            self.log.warning("TOPIC(%s): CHANNEL(%s): cannot dead-letter %s to %s: %s", channel.topic.name,
                             channel.name, message.id.decode("ascii", "replace"), name, error or "exiting")
            return False
        self.log.debug("TOPIC(%s): CHANNEL(%s): %s dead-lettered to %s after %d attempts", channel.topic.name,
                       channel.name, message.id.decode("ascii", "replace"), name, message.attempts)
        return True

    def add_client(self, transport) -> ClientV2:
        self._next_client_id += 1
        client = ClientV2(self, transport, self._next_client_id)
        self.clients[client.id] = client
        return client

    def remove_client(self, client: ClientV2) -> None:
        self.clients.pop(client.id, None)

    @property
    def health(self) -> str:
        """NSQ's /ping answer; a replicated nsqd that cannot make the
        copies a publish needs is not healthy either."""
        if self.health_error is not None:
            return f"NOK - {self.health_error}"
        refused = self.publish_refusal()
        return "OK" if refused is None else f"NOK - {refused}"

    def publish_refusal(self) -> str | None:
        """Why a publish would be refused before it is queued (a replicated
        nsqd that cannot make its copies), or None."""
        return None if self.replication is None else self.replication.refusal()

    def channels(self):
        for topic in self.topics.values():
            yield from topic.channels.values()

    # --- background loops ----------------------------------------------------------------------

    async def _queue_scan_loop(self) -> None:
        """Every queue_scan_interval: time out in-flight messages, release due
        deferred ones. Only channels holding such messages are visited, and
        each one's work is proportional to what expired."""
        interval = self.options.queue_scan_interval
        while True:
            await asyncio.sleep(interval)
            now = self.loop.time()
            for channel in list(self.timed_channels):
                try:
                    channel.process_timeouts(now)
                except OSError as error:
                    self.health_error = str(error)
                    self.log.error("CHANNEL(%s): failed to requeue: %s", channel.name, error)

    async def _sync_loop(self) -> None:
        """fsync every disk queue that was written since the last sync, every --sync-timeout."""
        interval = max(self.options.sync_timeout, 0.01)
        while True:
            await asyncio.sleep(interval)
            for topic in list(self.topics.values()):
                disks = [topic.queue.disk, topic.topic_log]
                for channel in topic.channels.values():
                    disks += [channel.queue.disk, channel.deferred_disk]
                for disk in disks:
                    if disk is not None and disk.needs_sync:
                        try:
                            disk.sync()
                        except OSError as error:
                            self.health_error = str(error)
                            self.log.error("DISKQUEUE(%s): sync failed: %s", disk.name, error)


def _refuse_retained_topics(entries) -> None:
    """A topic made retained without replication (nsqd.dat says so) cannot
    start replicated: its log is not copied to peers, so a takeover would
    lose what only the log holds."""
    for topic_name, _, _, retention_settings, *_ in entries:
        if retention_settings["seconds"] or retention_settings["max_bytes"]:
            raise StartupError(f"topic {topic_name} is retained (nsqd.dat) and --replication-factor is above 1: a "
                               "retained topic's log is not replicated yet; turn its retention off without "
                               f"--replication-factor (POST /topic/config?topic={topic_name}&retention=0&"
                               "retention_bytes=0) or start this data dir unreplicated")
