"""Import torch.compile's machinery in the background while the user's workload is built.

``torch.compile`` spends about 4 s importing dynamo and inductor the first time
(measured on an H200 machine, torch 2.11: the ``compile_wrapper`` part of a
trial's setup breakdown). None of it depends on the model, so a thread started
before the workload is imported and built overlaps the two; the Trainer's own
``torch.compile`` call then finds the modules imported (or waits on Python's
import lock for the rest). A failure here is logged and changes nothing: the
Trainer imports them again itself.
"""

from __future__ import annotations

import importlib
import logging
import threading

log = logging.getLogger(__name__)

MODULES = ("torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.async_compile")


def _run() -> None:
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception as e:  # any import error: the Trainer's own import will say it properly
            log.info("prewarm import of %s failed (%s: %s); torch.compile imports it itself", name, type(e).__name__, e)
            return


def start(compile_mode: str) -> threading.Thread | None:
    """Start the background imports when the run will compile; the thread, or None."""
    if compile_mode == "none":
        return None
    thread = threading.Thread(target=_run, name="statictrain-prewarm", daemon=True)
    thread.start()
    return thread
