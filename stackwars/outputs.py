"""Every file a command writes goes through here, so that no output can destroy what it points at.

One rule for ``run --json``, the studies' ``--json``, ``export -o``, ``report --out``,
``fidelity --out``, ``train --out`` and every file they write:

* ``check`` (before any work): a path that is, or links to, a SQLite database (any, not only
  the ones the command uses: the file's header says so) is refused; an existing path that is not a regular file (a device such as /dev/full, a FIFO,
  a socket, a directory) is refused, since replacing it would destroy it and writing into a
  FIFO can wait forever (stdout is how to stream); the directory must exist and take a file.
* ``write``: a symbolic link is written through (its target is replaced, the link stays);
  the data goes to a temporary file beside the target, is flushed to disk and replaces the
  target in one rename; a write that fails (a full disk) removes the temporary file and
  says what happened, and the target keeps its old content.
* ``emit``: writing to stdout (``show``, ``export``, ``verdict``) that fails ends with a
  message, not a traceback; a reader that closed the pipe (``| head``) ends it quietly.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Iterable

from stackwars.errors import SpecError, StackwarsError


class OutputError(StackwarsError):
    """A write that failed after the work was done (a full disk): exit status 1, not 2."""

    exit_code = 1


def _target(path: Path) -> Path:
    """Where the bytes land: a symbolic link's final target, else the path itself."""
    return Path(os.path.realpath(path.expanduser()))


def same_file(a: Path, b: Path) -> bool:
    a, b = _target(Path(a)), _target(Path(b))
    if a == b:
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


NAME_MAX = 255  # bytes in one component of a path (Linux's, and most file systems')


def check_name(path: Path, flag: str) -> Path:
    """The one check every path the tool reads or writes goes through first: a name that cannot
    be written as bytes (not valid UTF-8 where it came from the command line), a component over
    NAME_MAX bytes, or a chain of links that loops, refused with exit 2 and one line naming the
    option, never a traceback from the first system call that meets it."""
    text = str(path)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        shown = text.encode("utf-8", "backslashreplace").decode("ascii", "replace")
        raise SpecError(f"{flag} {shown}: the name is not valid UTF-8; give a name in UTF-8") from None
    long = [part for part in raw.split(b"/") if len(part) > NAME_MAX]
    if long:
        raise SpecError(f"{flag} {text[:80]}...: a part of the name is {len(long[0])} bytes long, more than the "
                        f"{NAME_MAX} a file name may have; give a shorter name")
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SpecError(f"{flag} {text}: its links loop (a link that leads back to itself); give a path that "
                            f"ends at a file or a folder") from None
        if exc.errno == errno.ENAMETOOLONG:
            raise SpecError(f"{flag} {text[:80]}...: the name is too long for this system; give a shorter "
                            f"one") from None
    return Path(path)


def check(path: Path, flag: str, databases: Iterable[Path] = ()) -> Path:
    """Refuse, before any work, an output that would destroy something or could not be
    written; returns the path as given (``write`` follows its link when it writes)."""
    path = Path(path).expanduser()
    if str(path) in ("", "."):
        raise SpecError(f"{flag} is empty; give a file name")
    check_name(path, flag)
    for db in databases:
        if db is not None and same_file(path, Path(db)):
            raise SpecError(f"{flag} {path} is the results database this command uses; writing there would "
                            f"destroy it: give another file name")
    target = _target(path)
    refuse_database(target, path, flag)
    if target.exists() or target.is_symlink():
        mode = os.stat(target).st_mode if target.exists() else 0
        if stat.S_ISDIR(mode):
            raise SpecError(f"{flag} {path} is a directory; give a file name")
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
            raise SpecError(f"{flag} {path} is {kind}: it would be replaced (or block forever); give a regular "
                            f"file, or leave {flag} out to write to standard output")
    parent = target.parent
    if not parent.exists():
        raise SpecError(f"{flag} {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise SpecError(f"{flag} {path}: {parent} is not a directory")
    try_write_in(parent, f"{flag} {path}")
    return path


REPLACES = " (an existing file is replaced; a SQLite database never is)"  # what every output option's help says
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database file


def is_database(path: Path) -> bool:
    """Whether ``path`` (followed through links) is a SQLite database, by its header: whichever
    program made it, results of another run, another tool's data. Unreadable: not known to be one."""
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


COMPANIONS = ("-wal", "-shm", "-journal")  # SQLite's files beside a database: they may hold its only copy of data


def database_of(target: Path) -> Path | None:
    """The SQLite database ``target`` belongs to as a companion (its write-ahead log, shared
    memory or journal, or a run's lock ``DB.RUN.lock``), where that database exists; else None."""
    name = target.name
    bases = [name[:-len(s)] for s in COMPANIONS if name.endswith(s)]
    if name.endswith(".lock") and name.count(".") >= 2:
        bases.append(name[:-len(".lock")].rsplit(".", 1)[0])
    for base in bases:
        db = target.with_name(base)
        if base and db.is_file() and is_database(db):
            return db
    return None


def refuse_database(target: Path, path: Path, flag: str, error: type[StackwarsError] = SpecError) -> None:
    if target.is_file() and is_database(target):
        link = f" (a link to {target})" if Path(path).expanduser().is_symlink() else ""
        raise error(f"{flag} {path}{link} is a SQLite database; an output never replaces one: give another "
                        f"file name")
    owner = database_of(target)
    if owner is not None:
        raise error(f"{flag} {path} is beside the SQLite database {owner} under the name of one of its own files "
                    f"(its write-ahead log, shared memory, journal or a run's lock), which may hold data not yet "
                    f"in the database; an output never replaces one: give another file name")


def try_write_in(directory: Path, what: str, verb: str = "write") -> None:
    """Writability by trying (os.access says yes to root everywhere, /proc included): a
    temporary file created and removed in ``directory``; a failure is bad input naming ``what``."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".stackwars-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise SpecError(f"{what}: cannot {verb} in {directory} ({exc.strerror or exc})") from None


def write(path: Path, data: str | bytes, flag: str = "output") -> None:
    """``data`` into ``path`` whole or not at all (see the module docstring)."""
    target = _target(Path(path))
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = -1, ""
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
        # the mode a plain open() would give (mkstemp's is 0600), or the replaced file's own
        os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode) if target.exists() else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            fd = -1
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if target.exists() and not stat.S_ISREG(os.stat(target).st_mode):
            raise SpecError(f"{flag} {path} is no longer a regular file; not replaced")
        refuse_database(target, path, flag, OutputError)  # one made there while the command worked
        os.replace(tmp, target)
        tmp = ""
    except OSError as exc:
        raise OutputError(f"{flag} {path}: could not write it ({exc.strerror or exc}); "
                          f"{'its old content is unchanged' if target.exists() else 'nothing was written there'}"
                          ) from None
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def emit(text: str) -> None:
    """``text`` to stdout; a failure says so (exit 1), a closed pipe ends quietly."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader is gone (``| head``): nothing more to say, and Python must not try again at exit
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise OutputError(f"could not write to standard output ({exc.strerror or exc})") from None
