"""One V2 connection's state: negotiated settings, RDY window, counters,
heartbeats and the output buffer. The messages it holds in flight are its
channel's (``Channel.in_flight``); the client only counts them.

Frames are appended to a list and written with one ``transport.write`` per
loop iteration, or at once when ``output_buffer_size`` is reached, so a
batch of deliveries costs one syscall and an idle consumer waits for nothing.
"""

import random
import time
from typing import Any

from ..protocol.errors import ProtocolError
from ..protocol.frames import FRAME_HEADER_SIZE, encode_error, encode_response, HEARTBEAT_FRAME
from ..protocol.identify import ClientSettings
from ..protocol.message import MESSAGE_HEADER_SIZE, message_frame_header
from ..protocol.v2 import State
from .auth import peer_common_name
from .dirty import DirtyWriters
from .writes import Writes

#: Mean bytes per buffered frame part from which a flush hands the parts to
#: the transport as they are instead of joining them: joining copies every
#: body, which costs little for small messages and more than the write for
#: bodies of tens of KiB.
SEPARATE_WRITES_FROM = 4096


class ClientV2:
    def __init__(self, nsqd, transport, client_id: int):
        self.nsqd = nsqd
        self.loop = nsqd.loop
        self.writes: Writes = nsqd.writes
        self.dirty: DirtyWriters = nsqd.dirty
        self.transport = transport
        self.id = client_id
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.remote_address = f"{peer[0]}:{peer[1]}"
            host = peer[0]
        else:
            self.remote_address = str(peer or "")
            host = ""
        self.remote_ip = host
        options = nsqd.options
        self.settings = ClientSettings(
            client_id=host,
            hostname=host,
            output_buffer_timeout=int(options.output_buffer_timeout * 1000),
            msg_timeout=int(options.msg_timeout * 1000),
        )
        self.state = State.INIT
        self.ready_count = 0
        self.in_flight_count = 0  # kept by the channel, which holds the messages
        self.message_count = 0
        self.finish_count = 0
        self.requeue_count = 0
        self.connect_ts = int(time.time())
        self.channel: Any = None  # a Channel once subscribed
        self.pub_counts: dict[str, int] = {}
        self.write_paused = False
        self.closed = False
        self.replies = 0  # frames answering commands, so the connection sees new ones

        self.codec: Any = None  # snappy or deflate, once negotiated
        self.tls: dict = {}  # TLS fields for /stats, once upgraded
        self.auth: Any = None  # an AuthState once AUTH succeeded
        self.auth_secret = ""
        self.repl_nonce = b""  # what this connection was asked to prove itself a replication member with
        self.repl_member = ""  # the member it proved itself to be: its REPL batches are taken
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flushes = 0  # how many times _out was written: a place in it holds until the next
        self._close_after_flush = False  # an answer was replaced by a fatal error (replace_answer)
        self._flush_scheduled = False
        self._heartbeat: Any = None  # the next heartbeat's TimerHandle
        self._apply_settings()

    def proved_member(self) -> bool:
        """Whether this connection proved it is a replication member (RAUTH):
        only then is a REPL batch's body read."""
        return self.repl_member != ""

    # --- settings ------------------------------------------------------------

    def update_settings(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._apply_settings()

    def _apply_settings(self) -> None:
        settings = self.settings
        self.msg_timeout = settings.msg_timeout / 1000
        self.sample_rate = settings.sample_rate
        self.buffer_size = settings.output_buffer_size
        # the whole-command deadline (V2Protocol): twice the heartbeat interval, 0 for none
        self.command_time = 2 * settings.heartbeat_interval / 1000
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        if settings.heartbeat_interval > 0:
            interval = settings.heartbeat_interval / 1000
            self._heartbeat = self.loop.call_later(interval, self._on_heartbeat, interval)

    def _on_heartbeat(self, interval: float) -> None:
        """A ticker, as in nsqd: a heartbeat every interval whatever the traffic.
        (A client that stops answering is dropped by the connection's
        whole-command deadline, see V2Protocol.)"""
        if self.closed:
            return
        self._out.append(HEARTBEAT_FRAME)
        self.flush()
        self._heartbeat = self.loop.call_later(interval, self._on_heartbeat, interval)

    # --- delivery -------------------------------------------------------------

    def window(self) -> int:
        """How many more messages this client may be sent now."""
        if self.state != State.SUBSCRIBED or self.write_paused:
            return 0
        return self.ready_count - self.in_flight_count

    def samples(self, message) -> bool:
        """Whether this client takes ``message`` (IDENTIFY's sample_rate)."""
        return not self.sample_rate or random.randrange(100) <= self.sample_rate

    def deliver(self, messages) -> None:
        """Send a burst of messages the channel has just put in flight with this client."""
        out = self._out
        size = 0
        for message in messages:
            attempts = message.attempts = (message.attempts + 1) & 0xFFFF
            body = message.body
            out.append(message_frame_header(message.timestamp, attempts, message.id, len(body)))
            out.append(body)
            size += len(body)
        count = len(messages)
        self.in_flight_count += count
        self.message_count += count
        self._out_bytes += count * (FRAME_HEADER_SIZE + MESSAGE_HEADER_SIZE) + size
        if self._out_bytes >= self.buffer_size:
            self.flush()
        else:
            self.flush_soon()

    def on_window_opened(self) -> None:
        if self.channel is not None:
            self.channel.schedule_dispatch()

    # --- output -----------------------------------------------------------------

    # Responses are only buffered: the connection flushes at the end of the
    # loop's turn, once it has handled everything one read of the socket
    # brought (V2Protocol._run, writes.py).

    def send_response(self, data: bytes) -> None:
        self.replies += 1
        self._out.append(encode_response(data))

    def send_frame(self, frame: bytes) -> None:
        self.replies += 1
        self._out.append(frame)

    def send_error(self, error: ProtocolError) -> None:
        self.replies += 1
        self._out.append(encode_error(error))

    def flush_soon(self) -> None:
        """Flush once this turn of the event loop has handled its input, in
        one run with every other connection's (writes.py)."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.writes.later(self)

    def answer_place(self) -> tuple[int, int]:
        """Where the answer queued last lies, until it is written (replace_answer)."""
        return self._flushes, len(self._out) - 1

    def replace_answer(self, place: tuple[int, int], error: ProtocolError) -> bool:
        """``error`` goes instead of the answer queued at ``place``, and the
        connection closes once it is written (nsqd's errors are fatal);
        False when that answer has been written already."""
        flushes, index = place
        if flushes != self._flushes or self.closed:
            return False
        self._out[index] = encode_error(error)
        self._close_after_flush = True
        return True

    def flush(self) -> None:
        """What this client has to hear, written now. The turn's writes
        (dirty.py) come first: an answer confirms what came before it (a
        PUB queued, FINs journaled where kill -9 cannot reach them), and a
        write the disk refuses takes back the OKs still here."""
        dirty = self.dirty
        if dirty.writers:
            dirty.flush()
        self._flush_scheduled = False
        out = self._out
        if out and not self.closed:
            if self.codec is None and self._out_bytes >= len(out) * SEPARATE_WRITES_FROM:
                # big bodies: one copy of each into a joined buffer (fresh memory,
                # faulted in page by page) cost more than writing them as they are
                self.transport.writelines(out)
            else:
                data = b"".join(out)
                if self.codec is not None:
                    data = self.codec.encode(data)
                self.transport.write(data)
        out.clear()
        self._out_bytes = 0
        self._flushes += 1
        if self._close_after_flush and not self.closed:
            self.closed = True
            self.transport.close()

    @property
    def common_name(self) -> str:
        """Subject CN of the client's verified TLS certificate, for the auth server."""
        return peer_common_name(self.transport.get_extra_info("ssl_object"))

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self.on_window_opened()

    # --- lifecycle ----------------------------------------------------------------

    def close(self) -> None:
        """Flush what is pending and close the connection."""
        if self.closed:
            return
        self.flush()
        self.closed = True
        self.transport.close()

    def connection_lost(self) -> None:
        self.closed = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        if self.channel is not None:
            channel, self.channel = self.channel, None
            channel.remove_client(self)
        self.nsqd.remove_client(self)
