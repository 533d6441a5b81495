"""The one way a command reads a list of choices, repeated options or comma-separated values.

One rule for all of them, applied before anything is measured: an empty item, a value
given twice, or more than ``MAX_ITEMS`` values is an error that names the option and the
value, exit status 2. (A duplicate would measure the same thing twice and, where the result
is keyed by it, fail at the end after all the work.)
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from stackwars.errors import SpecError

T = TypeVar("T")
MAX_ITEMS = 256  # a sweep longer than this is a typo (or $(seq 1 5000)), not an experiment


def unique(values: Iterable[T] | None, flag: str) -> list[T]:
    """The values of a repeatable option (``-b X -b Y``), each at most once."""
    out: list[T] = []
    for v in values or ():
        if v in out:
            raise SpecError(f"{flag} {v} is given twice; give each value once")
        out.append(v)
    return out


def comma_list(text: str, flag: str, cast: Callable[[str], T] = str, what: str = "values",
               max_items: int = MAX_ITEMS, repeats: bool = False) -> list[T]:
    """``"a,b,c"`` as a list: no empty item (``"a,,b"``), at most ``max_items``, each item cast
    (``cast`` raising ValueError names the item); no duplicate, unless the list is a sequence
    of calls where coming back to a value is the point (``repeats``: a recompilation study's
    ``--vary m=8,16,8`` asks whether returning to 8 compiles again)."""
    parts = [p.strip() for p in str(text).split(",")]
    if any(p == "" for p in parts):
        raise SpecError(f"{flag} {text!r}: an empty item in the list; give {what} separated by commas")
    if len(parts) > max_items:
        raise SpecError(f"{flag}: {len(parts)} {what}, more than the {max_items} a sweep may have")
    out: list[T] = []
    for p in parts:
        try:
            v = cast(p)
        except (TypeError, ValueError):
            raise SpecError(f"{flag}: {p!r} is not allowed; give {what}") from None
        if v in out and not repeats:
            raise SpecError(f"{flag}: {p} is given twice; give each value once")
        if repeats and out and out[-1] == v:  # the same value twice at once: the second call is the first's
            raise SpecError(f"{flag}: {p} follows itself; a sequence may come back to a value (8,16,8 asks whether "
                            f"returning to 8 compiles again), but the same value twice in a row measures nothing new")
        out.append(v)
    return out


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def positive_ints(text: str, flag: str, what: str) -> list[int]:
    """A comma-separated sweep of positive integers ('1,16,128'), in increasing order."""
    return sorted(comma_list(text, flag, positive_int, f"positive integers ({what})"))


def assignments(items: Iterable[str], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` options (``--set``): each key at most once (the last would silently win)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise SpecError(f"{flag} expects KEY=VALUE, got {item!r}")
        if key.strip() in out:
            raise SpecError(f"{flag} {key.strip()} is given twice ({out[key.strip()]} and {value.strip()}); give "
                            f"each key once (a list of values is KEY=V1,V2)")
        out[key.strip()] = value.strip()
    return out


def one_of(values: Sequence[Any], allowed: Sequence[Any], what: str) -> None:
    """Refuse the first value that is not allowed, naming what is."""
    for v in values:
        if v not in allowed:
            raise SpecError(f"unknown {what} {v!r}; allowed: {', '.join(map(str, allowed))}")


# ---- the environment: every variable the tool reads, validated like an option -----------------------
# name -> (low, high, what it is, its default); a number outside [low, high], not a number, nan,
# inf or empty is refused, naming the variable, the range and the default (unset it to get that)
ENV_NUMBERS: dict[str, tuple[float, float, str, str]] = {
    "STACKWARS_DB_WAIT_S": (0.0, 86400.0, "seconds a database write waits for another process's lock", "300"),
    "XLA_PYTHON_CLIENT_MEM_FRACTION": (0.01, 1.0, "the fraction of a GPU's memory a JAX worker may take", "0.95"),
}
# name -> the values allowed
ENV_CHOICES: dict[str, tuple[str, ...]] = {
    "STACKWARS_FORKSERVER": ("0", "1"),
    "STACKWARS_PROBE_CACHE": ("0", "1"),
}
# set, they must name something (empty is a typo)
ENV_PATHS = ("STACKWARS_DB", "STACKWARS_DATA_DIR", "STACKWARS_CACHE_DIR")


def env_number(name: str, environ: Mapping[str, str] | None = None) -> float | None:
    """The variable as a number within its range, or None when it is unset."""
    import math

    raw = (os.environ if environ is None else environ).get(name)
    if raw is None:
        return None
    low, high, what, default = ENV_NUMBERS[name]
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low <= value <= high):
        raise SpecError(f"environment variable {name}={raw!r} is not allowed: give a number from {low:g} to "
                        f"{high:g} ({what}), or unset it for the default ({default})")
    return value


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Every variable the tool reads, checked before any work (exit 2 with what is allowed)."""
    env = os.environ if environ is None else environ
    for name in ENV_NUMBERS:
        env_number(name, env)
    for name, allowed in ENV_CHOICES.items():
        if name in env and env[name] not in allowed:
            raise SpecError(f"environment variable {name}={env[name]!r} is not allowed; allowed: "
                            f"{', '.join(allowed)} (or unset)")
    for name in ENV_PATHS:
        if name in env and not env[name].strip():
            raise SpecError(f"environment variable {name} is set but empty; give a path, or unset it")
