"""Shared CLI plumbing: consoles, the error decorator, option parsing helpers."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import typer
from rich.console import Console

from stackwars.errors import SpecError, StackwarsError
from stackwars.harness import tmp

out = Console()  # tables and reports: stdout
err = Console(stderr=True)  # progress, messages, errors: stderr

DB_HELP = "results database (default: $STACKWARS_DB or ./stackwars.db)"


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def command(fn: Callable) -> Callable:
    """Bad input (SpecError and friends) -> a clear message on stderr and exit code 2.
    Before the command runs, temporary directories left by stackwars processes that died
    (SIGKILL, a crash) are removed."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tmp.sweep()
        for console in (out, err):  # full width into files and pipes: nothing cut to '23…'
            console.width = _width(console)
        try:
            return fn(*args, **kwargs)
        except (SpecError, StackwarsError) as exc:
            fail(str(exc))

    return wrapper


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """While long work runs, SIGTERM and SIGHUP stop it as Ctrl-C does (finished work is
    kept, the worker is killed, temporary files are removed): a run started in the
    background ignores SIGINT (the shell sets SIG_IGN), so these are how it gets stopped."""
    def handler(signum, frame):
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def interruption(exc: BaseException) -> str:
    return f"stopped by {signal.Signals(exc.signum).name}" if isinstance(exc, Interrupted) else "interrupted"


def exit_code(exc: BaseException) -> int:
    """128 + the signal's number, as shells report it (130 for Ctrl-C)."""
    return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)


def _width(console: Console) -> int:
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if console.is_terminal:
        return console.size.width
    return WIDE_OUTPUT


def table_width() -> int:
    """The terminal's width (a narrow one gets the stacked layout); when the output is not a
    terminal (a file, a pipe), wide enough that no value is ever cut: rich would otherwise
    assume 80 columns and cut every value to '23…'. $COLUMNS overrides both."""
    return _width(out)


WIDE_OUTPUT = 250


def backend_names(names: Iterable[str] | None) -> list[str] | None:
    """Backends as given, an old name replaced by its current one with a note on stderr
    saying what it means (``torch-xla`` is not the torch_xla package)."""
    from stackwars import registry

    if names is None:
        return None
    for n in dict.fromkeys(names):
        note = registry.alias_note(n)
        if note:
            err.print(f"note: {note}", highlight=False)
    return [registry.canonical_backend(n) for n in names]


def parse_assignments(items: Iterable[str], flag: str) -> dict[str, str]:
    out_: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise SpecError(f"{flag} expects KEY=VALUE, got {item!r}")
        out_[key.strip()] = value.strip()
    return out_


def _try_write_in(directory: Path, what: str) -> None:
    """Writability by trying (os.access says yes to root everywhere, /proc included): create
    and remove a temporary file in ``directory``."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".stackwars-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise SpecError(f"{what}: cannot write in {directory} ({exc.strerror or exc})") from None


def writable_file(path: Path, flag: str) -> Path:
    """Check before any work that ``path`` can be written, so a bad path fails early and
    nothing is left behind."""
    path = path.expanduser()
    parent = path.resolve().parent
    if path.exists() and path.is_dir():
        raise SpecError(f"{flag} {path} is a directory; give a file name")
    if not parent.exists():
        raise SpecError(f"{flag} {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise SpecError(f"{flag} {path}: {parent} is not a directory")
    _try_write_in(parent, f"{flag} {path}")
    if path.exists():
        try:
            with open(path, "a"):
                pass
        except OSError as exc:
            raise SpecError(f"{flag} {path}: cannot write it ({exc.strerror or exc})") from None
    return path


def writable_dir(path: Path, flag: str) -> Path:
    """An output directory that exists and can be written, or can be created: checked by
    trying in the nearest existing ancestor, creating nothing."""
    path = path.expanduser()
    if path.exists():
        if not path.is_dir():
            raise SpecError(f"{flag} {path} exists and is not a directory")
        _try_write_in(path, f"{flag} {path}")
        return path
    ancestor = path.resolve().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise SpecError(f"{flag} {path}: {ancestor} is not a directory")
    _try_write_in(ancestor, f"{flag} {path}")
    return path


def number(value: float, flag: str, low: float | None = None, high: float | None = None,
           low_inclusive: bool = False, why: str = "") -> float:
    """A finite number within bounds; nan and inf are refused by name."""
    if value is None or not math.isfinite(value):
        raise SpecError(f"{flag} must be a finite number, got {value}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        raise SpecError(f"{flag} must be {'>=' if low_inclusive else '>'} {low:g}, got {value:g}{why}")
    if high is not None and value > high:
        raise SpecError(f"{flag} must be <= {high:g}, got {value:g}{why}")
    return value


def seed(value: int, flag: str = "--seed") -> int:
    if not 0 <= value < 2**63:
        raise SpecError(f"{flag} must be a non-negative integer below 2**63, got {value}")
    return value


PROFILE_HELP = ("after each cell's timed calls, run N more steps under the framework's profiler (torch.profiler / "
                "jax.profiler), keep the trace and summarise it (`stackwars show --profile`); 0 = off")
PROFILE_DIR_HELP = "where the traces go, a folder per run (default: profiles/ beside the database)"


def profile_settings(steps: int, folder: Path | None, db_path: Path) -> dict[str, object]:
    """MeasureConfig fields for --profile N [--profile-dir DIR], checked before anything runs."""
    if not 0 <= steps <= 100:
        raise SpecError(f"--profile takes 0 (off) to 100 steps, got {steps}")
    if not steps:
        return {"profile_steps": 0, "profile_dir": None}
    folder = writable_dir(folder if folder is not None else db_path.resolve().parent / "profiles", "--profile-dir")
    return {"profile_steps": steps, "profile_dir": str(folder.resolve())}


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def command_line() -> str:
    return " ".join(["stackwars", *sys.argv[1:]])
