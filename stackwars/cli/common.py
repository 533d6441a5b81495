"""Shared CLI plumbing: consoles, the error decorator, option parsing helpers."""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperCommand

from stackwars import discovery, executors, outputs, registry
from stackwars.errors import SpecError, StackwarsError
from stackwars.harness import tmp
from stackwars.harness.settings import available_cpus
from stackwars.outputs import try_write_in
from stackwars.parse import check_environment, unique
from stackwars.records import DEVICES
from stackwars.runner import machine_memory
from stackwars.store.results import db_path, new_database

MIN_COLUMNS = 20  # a $COLUMNS narrower than this (0, a typo) would print nothing or a column a line: not used


def _usable_columns() -> None:
    """$COLUMNS that is not a width any table fits (0, negative, words) is set aside before the
    consoles read it (rich printed nothing at all at COLUMNS=0, and exited 0)."""
    value = os.environ.get("COLUMNS")
    if value is not None and not (value.strip().isdigit() and int(value) >= MIN_COLUMNS):
        os.environ.pop("COLUMNS")


_usable_columns()


class _Console(Console):
    """Text is wrapped at the width between words, never inside one: rich broke a word longer
    than the width mid-word (a path, on a terminal; a file or a pipe gets 250 columns), and a
    command between its words, so that what was copied from it was broken (the first line of a
    `stackwars run --resume ID --db PATH`, pasted, ran without --db). A word stays whole, a
    backticked command stays whole on one line, each longer than the width if it must be (a
    terminal wraps it for the eye and copies it whole). Tables and the progress bar are laid out
    for their width as before; text a caller laid out itself is printed with ``soft_wrap=True``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, emoji=False, **kwargs)  # a user's `x:smile:y.db` is a file name, not an emoji

    def render_str(self, text: str, **kwargs) -> Text:
        """A message's own styles (``OUR_STYLES``) as styles, and every other bracket as text: the
        user's words inside a message (a path, a model's name, `stackwars[slurm]`) are never markup."""
        if kwargs.get("markup") is not False and self._markup:
            text = _NOT_OURS.sub(lambda m: "\\" + m.group(0), text)
        return super().render_str(text, **kwargs)

    def print(self, *objects, soft_wrap=None, **kwargs) -> None:
        if soft_wrap is None and objects and all(isinstance(o, (str, Text)) for o in objects) \
                and kwargs.get("no_wrap") is None and kwargs.get("overflow") is None:
            text = Text(kwargs.pop("sep", " ")).join(
                self.render_str(o, emoji=kwargs.get("emoji"), markup=kwargs.get("markup"),
                                highlight=kwargs.get("highlight")) if isinstance(o, str) else o for o in objects)
            width = min(kwargs.pop("width", None) or self.width, self.width)
            super().print(Text("\n").join(wrap_words(text, width)), soft_wrap=True, **kwargs)
            return
        super().print(*objects, soft_wrap=soft_wrap, **kwargs)


OUR_STYLES = ("bold red", "bold", "yellow", "red", "green", "dim", "cyan", "magenta", "blue", "white")
# a bracketed word that is not one of the messages' own style tags (nor a closing one): escaped
_NOT_OURS = re.compile(r"(?<!\\)\[(?!(?:/|/?(?:%s))\])[^\[\]\n]*\]" % "|".join(re.escape(s) for s in OUR_STYLES))
_UNIT = re.compile(r"\S*`[^`\n]*`\S*|\S+")  # a backticked command (with what is glued to it), or a word


def wrap_words(text: Text, width: int) -> list[Text]:
    """``text``'s lines wrapped at ``width`` between words (styles kept): a word or a backticked
    command longer than the width on a line of its own (after the line's indent, if first), whole."""
    lines: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        cuts, start = [], 0
        for i, unit in enumerate(_UNIT.finditer(line.plain)):
            if i and unit.end() - start > width:  # the first unit stays with the line's indent
                cuts.append(unit.start())
                start = unit.start()
        for piece in line.divide(cuts):
            piece.rstrip()
            lines.append(piece)
    return lines


out = _Console()  # tables and reports: stdout
err = _Console(stderr=True)  # progress, messages, errors: stderr

DB_HELP = "results database (default: $STACKWARS_DB or ./stackwars.db)"


def waiting(message: str) -> None:
    """What a database write that waits for another process's lock tells the user."""
    err.print(f"[yellow]{message}[/]", highlight=False)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


INTERNAL_ENV = ("STACKWARS_PROGRESS_FILE", "STACKWARS_PARENT_PID")  # set by a parent for its workers only


def command(fn: Callable) -> Callable:
    """Bad input (SpecError and friends) -> a clear message on stderr and exit code 2.
    Before the command runs, temporary directories left by stackwars processes that died
    (SIGKILL, a crash) are removed; the environment is checked like the options. A results
    database the command created and stored nothing in is removed when the command fails, and
    records skipped as unreadable are named at its end."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # the channel from a worker to its parent is the tool's own: a command never writes progress
        # into a file its caller's environment names (its workers get a file of their parent's making)
        for name in INTERNAL_ENV:
            os.environ.pop(name, None)
        tmp.sweep()
        for console in (out, err):  # full width into files and pipes: nothing cut to '23…'
            console.width = _width(console)
        try:
            check_environment()  # the variables the tool reads, like options: before any work
            for name, value in kwargs.items():  # one rule for a choice given twice, before any work
                if isinstance(value, list):
                    unique(value, _flag(name))
            if kwargs.get("timeout") is not None:  # every command's --timeout: a finite, positive time
                number(kwargs["timeout"], "--timeout", low=0, why=" (seconds)")
            discovery.bound_waits(kwargs.get("timeout"))  # a model file's import check included
            device = kwargs.get("device")  # every command that takes --device: can this machine do it?
            for d in (device if isinstance(device, list) else [device] if device else []):
                check_device(d)
            if "db" not in kwargs:
                return fn(*args, **kwargs)
            # the name first (too long, not UTF-8, links that loop: one line, never a traceback); then a database
            # this command created and stored nothing in is removed if it fails
            with new_database(outputs.check_name(db_path(kwargs["db"]), "--db")):
                return fn(*args, **kwargs)
        except (SpecError, StackwarsError) as exc:
            fail(str(exc), getattr(exc, "exit_code", 2))
        except BrokenPipeError:  # the reader of our output went away (``| head``): nothing to say
            _silence_stdout()
            raise typer.Exit(0)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
                raise
            _silence_stdout()  # the failing stream must not fail again at exit
            fail(f"could not write the output ({exc.strerror or exc}); finished work stored in the database is "
                 f"kept", 1)
        finally:
            _name_skipped()

    return wrapper


def _name_skipped() -> None:
    """The stored records the command could not read and skipped, each named once."""
    results = sys.modules.get("stackwars.store.results")
    if results is None or not results.SKIPPED:
        return
    for problem in results.SKIPPED:
        err.print(f"[yellow]warning:[/] {problem}", highlight=False)
    results.SKIPPED.clear()


def refuse_empty_values(argv: list[str]) -> None:
    """An option given an empty value (``--db ''``) is refused by name, exit 2: typer would turn
    it into the current directory, and the message would then be about '.'."""
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and eq and not value.strip():
            fail(f"{name} is empty; give a value")
        if arg.startswith("-") and not eq and i + 1 < len(argv) and argv[i + 1].strip() == "":
            fail(f"{arg} is empty; give a value")


def refuse_given_twice(params, argv: list[str]) -> None:
    """An option of one value given more than once, under any of its names, refused by name."""
    for p in params:
        if p.param_type_name != "option" or p.multiple or getattr(p, "count", False):
            continue
        opts = [*p.opts, *p.secondary_opts]
        given = [a.partition("=")[0] for a in argv if a.partition("=")[0] in opts]
        if len(given) > 1:
            names = list(dict.fromkeys(given))
            fail(f"{' and '.join(names)} given {len(given)} times"
                 + (f": {' and '.join(opts)} name one setting" if len(names) > 1 else "") + "; give it once")


class OneValueCommand(TyperCommand):
    """A subcommand: an option that takes one value, given twice under any of its names
    (``--processes 2 --repeat 3``, ``--screen --no-screen``), is refused by name (click keeps the last
    silently), as a choice given twice is everywhere else."""

    def parse_args(self, ctx, args):
        refuse_given_twice(self.params, args)
        return super().parse_args(ctx, args)


def check_device(device: str) -> None:
    """Before any work: a device this machine has. A GPU asked for where none is visible would
    otherwise run to the end and store a run of ``unsupported`` cells, exit 0."""
    if device not in DEVICES:
        raise SpecError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    if device == "cuda":
        if machine_memory()[1] is None:
            raise SpecError("--device cuda: no NVIDIA GPU is visible here (NVML finds none); nothing was run or "
                            "written. Use --device cpu, or run on a machine with a GPU")


def _flag(param: str) -> str:
    """The option a command parameter comes from: ``scaling_`` is ``--scaling``; positional
    arguments (``workloads``, ``run_ids``) are named by what they hold."""
    if param in ("workloads", "run_ids", "sources"):
        return {"workloads": "workload", "run_ids": "run", "sources": "source"}[param]
    return "--" + param.rstrip("_").replace("_", "-")


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


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
    except (KeyboardInterrupt, Interrupted):
        tmp.remove_own()  # what a signal left between making a folder and the block that removes it
        raise
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def interruption(exc: BaseException) -> str:
    return f"stopped by {signal.Signals(exc.signum).name}" if isinstance(exc, Interrupted) else "interrupted"


def exit_code(exc: BaseException) -> int:
    """128 + the signal's number, as shells report it (130 for Ctrl-C)."""
    return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)


def _width(console: Console) -> int:
    if os.environ.get("COLUMNS", "").isdigit() and int(os.environ["COLUMNS"]) >= MIN_COLUMNS:
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
    if names is None:
        return None
    for n in dict.fromkeys(names):
        note = registry.alias_note(n)
        if note:
            err.print(f"note: {note}", highlight=False)
    return [registry.canonical_backend(n) for n in names]


def writable_dir(path: Path, flag: str, dirs: Sequence[str] = (), files: Sequence[str] = ()) -> Path:
    """An output directory that exists and can be written, or can be created: checked by
    trying in the nearest existing ancestor, creating nothing. ``dirs`` and ``files``: the parts
    the command writes inside it (``figures``, ``report.html``), each checked to be of its kind
    where it exists already, so that a file where a folder belongs is refused before any work,
    not met half-way through the writing."""
    path = path.expanduser()
    outputs.check_name(path, flag)
    if path.exists():
        if not path.is_dir():
            raise SpecError(f"{flag} {path} exists and is not a directory")
        for part in dirs:
            inside = path / part
            if (inside.exists() or inside.is_symlink()) and not inside.is_dir():
                raise SpecError(f"{flag} {path}: {inside} is in the way, not a directory; the command writes its "
                                f"{part}/ there: move it, or give another {flag}")
        for part in files:
            outputs.check(path / part, flag)
        try_write_in(path, f"{flag} {path}")
        return path
    ancestor = path.resolve().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise SpecError(f"{flag} {path}: {ancestor} is not a directory")
    try_write_in(ancestor, f"{flag} {path}")
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


def command_line() -> str:
    return " ".join(["stackwars", *sys.argv[1:]])


EXECUTOR_HELP = ("where the cells run: serial (one at a time here, the default); gpu-pool (one cell per GPU of this "
                 "node at a time, each worker on its own GPU and cores); ray (each cell a Ray task: one GPU, or a "
                 "whole CPU node); slurm (each cell a SLURM job through submitit: one GPU, or a whole node); "
                 "submitit-local (submitit's jobs one at a time on this host)")

EXECUTOR_OPTION = typer.Option("serial", "--executor", help=EXECUTOR_HELP)
GPUS_OPTION = typer.Option(None, "--gpus", help="gpu-pool: the GPU indices to use, comma-separated (default: every "
                                                "GPU NVML sees)")
RAY_ADDRESS_OPTION = typer.Option(None, "--ray-address", help="ray: the cluster to join (HOST:PORT, or auto; "
                                                              "default: a Ray cluster of this host, started for the "
                                                              "run)")
SHARED_DIR_OPTION = typer.Option(None, "--shared-dir", help="ray, slurm: a folder every node sees, for the run's "
                                                            "float64 reference cache (and slurm's job files); "
                                                            "without it on a cluster each cell computes its own "
                                                            "reference")
SLURM_PARTITION_OPTION = typer.Option(None, "--slurm-partition", help="slurm: the partition to submit to")
MAX_JOBS_OPTION = typer.Option(None, "--max-jobs", help="slurm: at most this many cells' jobs at once (the job "
                                                        "array's %N)")


def executor_choice(name: str, gpus: str | None, ray_address: str | None, shared_dir: Path | None,
                    slurm_partition: str | None, max_jobs: int | None, inline: bool = False):
    """The executor the options choose, as data (executors.Choice), its options checked."""
    if name not in executors.EXECUTORS:
        raise SpecError(f"unknown executor {name!r}; allowed: {', '.join(executors.EXECUTORS)}")
    if inline and name != "serial":
        raise SpecError(f"--inline runs cells in this process; --executor {name} runs them in workers")
    if shared_dir is not None:
        shared_dir = writable_dir(shared_dir, "--shared-dir").resolve()
    return executors.Choice(name, gpus, ray_address, str(shared_dir) if shared_dir else None, slurm_partition,
                            max_jobs)


def make_executor(name: str, gpus: str | None, ray_address: str | None, shared_dir: Path | None,
                  slurm_partition: str | None, max_jobs: int | None, timeout_s: float, inline: bool):
    """The executor the options choose, its settings checked (bad input: exit 2, nothing written)."""
    choice = executor_choice(name, gpus, ray_address, shared_dir, slurm_partition, max_jobs, inline)
    # the folder is made when a run first needs it (Executor.scratch, Submitit.run): a command refused
    # after this point (an unreachable Ray, a plan that does not validate) leaves nothing behind
    return choice.make(timeout_s, available_cpus())
