"""The event loop every nsqpy program runs on: uvloop's when it is installed
(faster sockets and timers), asyncio's own otherwise."""

import asyncio


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
