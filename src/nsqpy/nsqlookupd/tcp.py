"""The V1 TCP protocol nsqd peers speak to register what they host."""

import asyncio
import json

from ..protocol import NSQ_VERSION
from ..protocol.commands import ABORT
from ..protocol.errors import E_BAD_CHANNEL, E_BAD_PROTOCOL, E_BAD_TOPIC, E_INVALID, ProtocolError
from ..protocol.lookup import MAGIC_V1, encode_error, encode_response, parse_peer_info, v1_reader
from ..protocol.names import is_valid_channel_name, is_valid_topic_name
from .registry import PeerInfo, Producer

OK = encode_response(b"OK")
CLIENT = ("client", "", "")


class _BadNameError(ProtocolError):
    """nsqlookupd names a topic or channel it refuses with ``'%s'``: the
    bytes as they came, UTF-8 or not (decoded with surrogateescape, which
    this frame undoes), as peers comparing error texts with NSQ's expect."""

    @property
    def frame_data(self) -> bytes:
        return f"{self.code} {self.description}".encode("utf-8", "surrogateescape")


class LookupProtocol(asyncio.Protocol):
    def __init__(self, lookupd):
        self.lookupd = lookupd
        self.db = lookupd.db
        self.transport = None
        self.remote_address = ""
        self.peer: PeerInfo | None = None
        self.reader = v1_reader(lookupd.options.max_body_size)
        self._magic = b""

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.remote_address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    def data_received(self, data: bytes) -> None:
        if len(self._magic) < 4:
            self._magic += data
            if len(self._magic) < 4:
                return
            magic, data = self._magic[:4], self._magic[4:]
            self._magic = magic
            if magic != MAGIC_V1:
                self._fail(ProtocolError(E_BAD_PROTOCOL, f"client({self.remote_address}) bad protocol magic"))
                return
        out = []
        for command in self.reader.feed(data):
            if command is ABORT:
                self.transport.close()
                return
            try:
                out.append(self._execute(command))
            except ProtocolError as error:
                out.append(encode_error(error))
                self.transport.write(b"".join(out))
                self.lookupd.log.error("client(%s) %s", self.remote_address, error)
                self.transport.close()
                return
        if out:
            self.transport.write(b"".join(out))

    # Every command is answered: a peer that does not read its answers stops
    # being read once they fill the write buffer (bounded memory per peer).
    def pause_writing(self) -> None:
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.transport.resume_reading()

    def _fail(self, error: ProtocolError) -> None:
        self.transport.write(encode_error(error))
        self.transport.close()

    def connection_lost(self, exc) -> None:
        if self.peer is not None:
            self.lookupd.log.info("CLIENT(%s): closing, removing its registrations", self.remote_address)
            self.db.remove_peer(self.peer.id)

    # --- commands ---------------------------------------------------------------------

    def _execute(self, command) -> bytes:
        name = command.name
        if name == b"PING":
            if self.peer is not None:
                self.peer.last_update = self.db.clock()
            return OK
        if name == b"IDENTIFY":
            return self._identify(command)
        if name in (b"REGISTER", b"UNREGISTER"):
            return self._registration(command, name.decode())
        raise ProtocolError(E_INVALID, f"invalid command {name.decode('latin-1')}")

    def _identify(self, command) -> bytes:
        if self.peer is not None:
            raise ProtocolError(E_INVALID, "cannot IDENTIFY again")
        if command.body_error is not None:
            raise command.body_error
        info = parse_peer_info(command.body)
        peer = PeerInfo(id=self.remote_address, remote_address=self.remote_address,
                        last_update=self.db.clock(), **info)
        self.db.add_producer(CLIENT, Producer(peer))
        self.peer = peer
        self.lookupd.log.info("CLIENT(%s): IDENTIFY %s (%s:%d)", self.remote_address, peer.hostname,
                              peer.broadcast_address, peer.tcp_port)
        lookupd = self.lookupd
        return encode_response(json.dumps({
            "tcp_port": lookupd.tcp_port, "http_port": lookupd.http_port, "version": NSQ_VERSION,
            "broadcast_address": lookupd.options.broadcast_address, "hostname": lookupd.hostname,
        }).encode())

    def _registration(self, command, name: str) -> bytes:
        if self.peer is None:
            raise ProtocolError(E_INVALID, "client must IDENTIFY")
        params = command.params
        if len(params) < 2:
            raise ProtocolError(E_INVALID, f"{name} insufficient number of params")
        topic = params[1].decode("utf-8", "surrogateescape")
        channel = params[2].decode("utf-8", "surrogateescape") if len(params) > 2 else ""
        if not is_valid_topic_name(topic):
            raise _BadNameError(E_BAD_TOPIC, f"{name} topic name '{topic}' is not valid")
        if channel and not is_valid_channel_name(channel):
            raise _BadNameError(E_BAD_CHANNEL, f"{name} channel name '{channel}' is not valid")
        peer = self.peer
        if name == "REGISTER":
            if channel and self.db.add_producer(("channel", topic, channel), Producer(peer)):
                self.lookupd.log.info("DB: client(%s) REGISTER category:channel key:%s subkey:%s",
                                      peer.id, topic, channel)
            if self.db.add_producer(("topic", topic, ""), Producer(peer)):
                self.lookupd.log.info("DB: client(%s) REGISTER category:topic key:%s", peer.id, topic)
        else:
            self.lookupd.log.info("DB: client(%s) UNREGISTER topic:%s channel:%s", peer.id, topic, channel)
            self.db.unregister(peer.id, topic, channel or None)
        return OK
