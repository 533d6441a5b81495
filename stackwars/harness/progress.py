"""Progress events from a worker to its parent: JSON lines appended to a file the parent
names in $STACKWARS_PROGRESS_FILE and reads while it waits. Outside a worker (inline
runs, tests) an optional in-process listener receives them instead."""

from __future__ import annotations

import json
import os
from typing import Any, Callable

ENV = "STACKWARS_PROGRESS_FILE"
_listener: Callable[[dict[str, Any]], None] | None = None


def report(**event: Any) -> None:
    if _listener is not None:
        _listener(event)
    path = os.environ.get(ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(event, default=str) + "\n")


def listen(callback: Callable[[dict[str, Any]], None] | None) -> None:
    global _listener
    _listener = callback


class Tail:
    """Reads the events appended since the last call."""

    def __init__(self, path: str):
        self.path, self.offset, self._partial = path, 0, ""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                chunk = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return []
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()  # an incomplete last line waits for the next read
        return [json.loads(line) for line in lines if line.strip()]
