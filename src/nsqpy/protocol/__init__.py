"""Sans-IO codecs for NSQ's wire formats.

Bytes in, values out: no sockets, no event loop, no clocks. The daemons, the
client and the tests all encode and decode through this package, so each wire
format is written exactly once.
"""

#: The NSQ release whose wire protocol and HTTP API nsqpy speaks. Clients
#: gate features on this value (DPUB needs >= 0.3.6, for example), so it is
#: what every daemon reports as its version.
NSQ_VERSION = "1.3.0"
