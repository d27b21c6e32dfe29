"""Where nsq_to_parquet looks for nsqd's HTTP API when given only a TCP
address: the next port, if its ``/info`` names that TCP port. Another
program there (on a busy machine, any port may be taken) means none."""

import socket
import threading

import pytest

from nsqpy.spark.backlog import http_address_beside


class OnePortServer(threading.Thread):
    """Answers each connection with ``answer`` once it has read the request."""

    def __init__(self, answer: bytes):
        super().__init__(daemon=True)
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(10)

    def run(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.recv(4096)
            conn.sendall(self.answer)


@pytest.mark.parametrize("answer", [
    b"GET /info HTTP/1.1\r\n\r\n",  # a line echo
    b"\x00\x00\x00\x1c\x00\x00\x00\x01E_BAD_PROTOCOL magic",  # an nsqd TCP port
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]",  # JSON, not nsqd's
], ids=["echo", "nsqd-tcp", "other-json"])
def test_a_program_on_the_next_port_that_is_no_nsqd_http_api_is_not_taken_for_one(answer):
    server = OnePortServer(answer)
    server.start()
    try:
        assert http_address_beside(f"127.0.0.1:{server.port - 1}") is None
    finally:
        server.sock.close()
        server.join(10)
