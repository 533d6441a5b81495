"""One run is measured by one process at a time.

A run's measuring process holds an exclusive ``flock`` on a lock file beside the database
(``DB.RUN_ID.lock``; in the temporary directory where the database's directory takes no
file). A second ``run --resume`` of the same run finds it held and is refused at once, naming
the holder (pid, host, since when), before it writes anything: two processes measuring the
same missing cells would store each twice. The kernel releases the lock when its process
ends, however it ends (SIGKILL included), so a crashed run never blocks its own resume.

The lock file is the tool's own: it is opened without following a link and must be a
regular file of this user (a link, a FIFO or another user's file at its path is refused, named,
and nothing is written through it), and the fallback lives in a folder of this user alone
(``stackwars-UID`` in the temporary directory, mode 0700), never under a name anyone could
plant in the shared temporary folder.

The file is removed when the lock is released. A process that opened it just before and
locks it after the removal would hold a lock on a file nobody else can find, so a lock taken
counts only while the path still names the file locked (the usual lock-file dance).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import stat
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from stackwars.errors import SpecError


def lock_paths(db: Path, run_id: str) -> list[Path]:
    db = Path(db)
    digest = hashlib.sha256(str(db.resolve()).encode()).hexdigest()[:12]
    return [db.with_name(f"{db.name}.{run_id}.lock"), private_dir() / f"{digest}-{run_id}.lock"]


def private_dir() -> Path:
    """This user's own folder in the temporary directory (made 0700 where missing): where the
    tool keeps what it creates when the database's folder takes no file. One that is a link, not
    a folder, another user's, or open to others is not used (its files could be redirected)."""
    path = Path(tempfile.gettempdir()) / f"stackwars-{os.getuid()}"
    with contextlib.suppress(OSError):
        os.mkdir(path, 0o700)
    return path


def _not_ours(path: Path) -> str | None:
    """Why the file at ``path`` (opened) may not be written as the tool's own, or None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode)
                else "not a regular file")
    if st.st_uid != os.getuid():
        return "another user's file"
    parent = os.lstat(path.parent)
    if path.parent.name.startswith("stackwars-") and (stat.S_ISLNK(parent.st_mode) or parent.st_uid != os.getuid()
                                                      or parent.st_mode & 0o077):
        return f"in {path.parent}, a folder this user does not own alone"
    return None


def open_own(path: Path, append: bool = False, what: str = "the run's lock file") -> int:
    """A file the tool keeps beside a database (a run's lock, its pending cells) at ``path``,
    created or opened as the tool's own (``_not_ours``): never through a link (O_NOFOLLOW), never
    blocking on a FIFO (O_NONBLOCK); anything else there is refused, named, nothing written."""
    why = _not_ours(path)
    if why is None:
        flags = os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_WRONLY | os.O_APPEND if append
                                                                           else os.O_RDWR)
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise
            why = _not_ours(path) or f"not openable as a lock ({exc.strerror})"
        else:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                return fd
            os.close(fd)
            why = _not_ours(path) or "not a regular file of this user"
    raise SpecError(f"{what} {path} is {why}: stackwars writes only files it created itself, so "
                    f"nothing was written through it; remove it (or give the database another place) and try again")


class RunLock:
    """Held from ``acquire`` to ``release`` (or the end of the process)."""

    def __init__(self, db: Path, run_id: str):
        self.db, self.run_id = Path(db), run_id
        self.fd: int | None = None
        self.path: Path | None = None

    def acquire(self) -> "RunLock":
        for path in lock_paths(self.db, self.run_id):
            try:
                fd = open_own(path)
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
                fd = open_own(path)
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                     "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}).encode())
            self.fd, self.path = fd, path
            return self
        raise SpecError(f"run {self.run_id}: no place to keep its lock file (beside {self.db}, or in "
                        f"{private_dir()}) can be written")

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
