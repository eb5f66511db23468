"""Calling the async Kube port from synchronous code that has no loop of its own (tools, tests).

The operator itself awaits every call on kopf's loop (its cost and anomaly
passes too: their CPU-bound parts run in worker threads without the port).
``LoopThread`` runs a loop in a thread and ``Blocking`` submits coroutines to
it and waits for their results.
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
