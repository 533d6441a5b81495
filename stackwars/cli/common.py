"""Shared CLI plumbing: consoles, the error decorator, option parsing helpers."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

import typer
from rich.console import Console

from stackwars.errors import SpecError, StackwarsError

out = Console()  # tables and reports: stdout
err = Console(stderr=True)  # progress, messages, errors: stderr

DB_HELP = "results database (default: $STACKWARS_DB or ./stackwars.db)"


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def command(fn: Callable) -> Callable:
    """Bad input (SpecError and friends) -> a clear message on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (SpecError, StackwarsError) as exc:
            fail(str(exc))

    return wrapper


def parse_assignments(items: Iterable[str], flag: str) -> dict[str, str]:
    out_: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise SpecError(f"{flag} expects KEY=VALUE, got {item!r}")
        out_[key.strip()] = value.strip()
    return out_


def writable_file(path: Path, flag: str) -> Path:
    """Check before any work that ``path`` can be written, so a bad path fails early."""
    parent = path.expanduser().resolve().parent
    if not parent.is_dir():
        raise SpecError(f"{flag} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise SpecError(f"{flag} {path}: directory {parent} is not writable")
    if path.exists() and path.is_dir():
        raise SpecError(f"{flag} {path} is a directory; give a file name")
    return path


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def command_line() -> str:
    return " ".join(["stackwars", *sys.argv[1:]])
