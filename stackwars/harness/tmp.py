"""Temporary directories that name their owner, and a sweep of those whose owner died.

Workers' task directories, cold compile caches and a run's shared references live under
the system's temporary directory as ``stackwars-<kind>-<pid>-<random>``. A process that ends
normally, by Ctrl-C, SIGTERM or SIGHUP removes its own; one killed by SIGKILL (or the
kernel's OOM killer) cannot, so every stackwars command first removes the directories whose
owner process no longer exists (``sweep``). Directories of live processes are never touched.

What is kept between commands (a downloaded MNIST, the machine probe's answer, Inductor's
vector-ISA test programs) lives in the user's cache folder instead (``cache_root``).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import psutil

PREFIX = "stackwars-"
_OWNED = re.compile(r"^stackwars-(?P<kind>[a-z-]+?)-(?P<pid>\d+)-[^-/]+$")


CACHE_ENV = "STACKWARS_CACHE_DIR"


def cache_root() -> Path:
    """The user's stackwars cache folder, kept between commands: ``$STACKWARS_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/stackwars``, by default ``~/.cache/stackwars``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "stackwars"


def mkdtemp(kind: str) -> str:
    """A fresh directory ``stackwars-<kind>-<pid>-<random>`` in the temporary directory."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-{os.getpid()}-")


def owner(name: str) -> int | None:
    m = _OWNED.match(name)
    return int(m.group("pid")) if m else None


def _remove(directory: str | None, whose) -> list[str]:
    """Remove the stackwars temporary directories whose owner's pid ``whose`` accepts; returns them."""
    root = directory or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        pid = owner(name) if name.startswith(PREFIX) else None
        if pid is None or not whose(pid):
            continue
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def sweep(directory: str | None = None) -> list[str]:
    """Remove stackwars temporary directories whose owner process is gone; returns them."""
    return _remove(directory, lambda pid: pid != os.getpid() and not psutil.pid_exists(pid))


def remove_own(directory: str | None = None) -> list[str]:
    """Remove this process's own directories: on a stop by signal, those a ``finally`` could
    not reach (the signal landed between creating one and entering the block that removes it)."""
    return _remove(directory, lambda pid: pid == os.getpid())
