"""A plain progress bar on a text stream (stderr), for long report queries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

__all__ = ["ProgressBar"]


@dataclass
class ProgressBar:
    stream: TextIO
    width: int = 30
    enabled: bool = True

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.enabled or total <= 0:
            return
        filled = self.width * done // total
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r[{bar}] {done}/{total} queries ({what})")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
