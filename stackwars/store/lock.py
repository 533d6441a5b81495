"""One run is measured by one process at a time.

A run's measuring process holds an exclusive ``flock`` on a lock file beside the database
(``DB.RUN_ID.lock``; in the temporary directory where the database's directory takes no
file). A second ``run --resume`` of the same run finds it held and is refused at once, naming
the holder (pid, host, since when), before it writes anything: two processes measuring the
same missing cells would store each twice. The kernel releases the lock when its process
ends, however it ends (SIGKILL included), so a crashed run never blocks its own resume.

The file is removed when the lock is released. A process that opened it just before and
locks it after the removal would hold a lock on a file nobody else can find, so a lock taken
counts only while the path still names the file locked (the usual lock-file dance).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from stackwars.errors import SpecError


def lock_paths(db: Path, run_id: str) -> list[Path]:
    db = Path(db)
    digest = hashlib.sha256(str(db.resolve()).encode()).hexdigest()[:12]
    return [db.with_name(f"{db.name}.{run_id}.lock"),
            Path(tempfile.gettempdir()) / f"stackwars-{digest}-{run_id}.lock"]


class RunLock:
    """Held from ``acquire`` to ``release`` (or the end of the process)."""

    def __init__(self, db: Path, run_id: str):
        self.db, self.run_id = Path(db), run_id
        self.fd: int | None = None
        self.path: Path | None = None

    def acquire(self) -> "RunLock":
        for path in lock_paths(self.db, self.run_id):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                continue  # not writable here: the next place
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _read(fd)
                    os.close(fd)
                    raise SpecError(f"run {self.run_id} is being measured by another process ({holder}); one run is "
                                    f"measured by one process at a time: wait for it to finish (or stop it), then "
                                    f"resume what is still missing") from None
                if _same(fd, path):
                    break
                os.close(fd)  # locked a file its holder removed: open the one the path names now
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                     "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}).encode())
            self.fd, self.path = fd, path
            return self
        raise SpecError(f"run {self.run_id}: no place to keep its lock file (beside {self.db}, or in "
                        f"{tempfile.gettempdir()}) can be written")

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # while still locked: nobody can take the old file after this
        os.close(self.fd)
        self.fd = self.path = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _same(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _read(fd: int) -> str:
    try:
        holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {holder['pid']} on {holder['host']}, since {holder['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said who it is yet"
