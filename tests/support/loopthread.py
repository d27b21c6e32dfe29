"""An asyncio event loop in a background thread, for test machinery that
must keep running while the test itself blocks (sleeps, waits for a
daemon, reads a socket): a proxy, a workload of clients."""

import asyncio
import threading


class LoopThread:
    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def spawn(self, coroutine):
        """-> a concurrent.futures.Future of the coroutine, run on the loop."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, coroutine, timeout: float = 30.0):
        return self.spawn(coroutine).result(timeout)

    def call_soon(self, callback, *args) -> None:
        self.loop.call_soon_threadsafe(callback, *args)

    @property
    def closed(self) -> bool:
        return self.loop.is_closed()

    def close(self, closing=None) -> None:
        """Every task cancelled and ended, then ``closing()`` awaited (to
        close what the tasks shared), then the loop stopped."""
        if self.closed:
            return
        self.call(self._cancel_all(closing))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    @staticmethod
    async def _cancel_all(closing) -> None:
        others = asyncio.all_tasks() - {asyncio.current_task()}
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        if closing is not None:
            await closing()
