"""Calling the async Kube port from a worker thread (the cost and anomaly parts' CPU-bound passes).

The port lives on kopf's event loop; a pass running in ``asyncio.to_thread``
submits each call back to that loop and waits for it, so every API call still
goes through the one session. This is the seam to remove once those passes
are async themselves.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["Blocking", "LoopThread"]

T = TypeVar("T")


class Blocking:
    """Runs coroutines on ``loop`` from another thread and waits for their results."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float = 120.0) -> None:
        self.loop, self.timeout_s = loop, timeout_s

    def __call__(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout_s)


class LoopThread:
    """An event loop in a daemon thread, for synchronous callers with no loop of their own (tools, tests).

    ``with LoopThread() as call:`` gives a Blocking bound to it; on exit the loop finalizes its async
    generators (what HttpKube left open is closed), then stops.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="statictrain-kube", daemon=True)

    def __enter__(self) -> Blocking:
        self.thread.start()
        return Blocking(self.loop)

    def __exit__(self, *_: object) -> None:
        asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
