"""The Python API: ``stackwars.run(...)`` and ``stackwars.verdict(...)`` return the answer as an object.

``stackwars.run`` is ``stackwars run``: the same options with the same defaults, read from the
command's own parameters (``cli/run_cmd.run``), checked by the same ``run_cmd.parse`` into the
same ``orchestrate.Request``, measured by the same engine (``orchestrate.execute``) into the same
database. Bad input raises ``SpecError`` with the command line's message, before anything is
probed or written. ``stackwars.verdict`` reads stored runs as ``stackwars verdict`` does
(``verdict_cmd.load``, then ``verdict.verdicts``). Both return a ``Result``: the verdict as typed
records (``VerdictRow``), the cells as a DataFrame, JSON (``stackwars verdict -f json``'s), the
details ``--explain`` prints, and an inline HTML view (the brief verdict and its forest plot) for
a notebook, as ``torch.utils.benchmark.Measurement`` and optimum-benchmark's report are objects.

A model defined in a notebook cell (a ``stackwars.Model`` given as an object) is sent to the
workers by value (``discovery.send_model``: cloudpickle); a model in a file, ``"file.py:NAME"``, as on the
command line.

It stands on the command line's floor (docs/contributing.md): a second front end to one request.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import html
import inspect
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

from stackwars import orchestrate
from stackwars.errors import SpecError

__all__ = ["Result", "RunInterrupted", "VerdictRow", "run", "verdict"]

# what only a terminal needs: the API returns the answer instead of printing it
_NOT_OPTIONS = ("ctx", "workloads", "verbose")


def _parameters() -> dict[str, inspect.Parameter]:
    """``stackwars run``'s parameters, by their Python names: the options this API takes."""
    from stackwars.cli import run_cmd

    return {n: p for n, p in inspect.signature(run_cmd.run).parameters.items() if n not in _NOT_OPTIONS}


def options() -> dict[str, Any]:
    """Every option ``stackwars.run`` takes, with its default: those of ``stackwars run``."""
    return {n: _default(p) for n, p in _parameters().items()}


def _default(p: inspect.Parameter) -> Any:
    value = getattr(p.default, "default", p.default)  # typer's OptionInfo / ArgumentInfo hold it
    return list(value) if isinstance(value, (list, tuple)) else value


def _coerce(name: str, value: Any, p: inspect.Parameter) -> Any:
    """A value given in Python as the command line would have parsed it: a list option takes one value
    or several, a path option a str or a Path; a wrong type is refused with what is allowed."""
    annotation = str(p.annotation)
    flag = "--" + name.rstrip("_").replace("_", "-")
    if value is None:
        return None
    if "list[" in annotation:
        if name == "set_" and isinstance(value, Mapping):  # set={"n_layer": 2}: --set n_layer=2
            value = [f"{k}={v}" for k, v in value.items()]
        values = [value] if isinstance(value, (str, int, float)) else list(value)
        if not all(isinstance(v, str) for v in values):
            raise SpecError(f"{name}= ({flag}) takes a str or a list of str, got {value!r}")
        return values
    if "Path" in annotation:
        if not isinstance(value, (str, Path)):
            raise SpecError(f"{name}= ({flag}) takes a path (str or pathlib.Path), got {type(value).__name__}")
        return Path(value) if str(value).strip() else value  # an empty name: refused as the command line refuses it
    default = _default(p)
    kind = "bool" if "bool" in annotation else "int" if "int" in annotation else "float" if "float" in annotation \
        else "str" if "str" in annotation else None
    if kind == "bool" and not isinstance(value, bool):
        raise SpecError(f"{name}= ({flag}) takes True or False, got {value!r}")
    if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise SpecError(f"{name}= ({flag}) takes a whole number, got {value!r}")
    if kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise SpecError(f"{name}= ({flag}) takes a number, got {value!r}")
    if kind == "str" and not isinstance(value, str):
        raise SpecError(f"{name}= ({flag}) takes a str, got {value!r}")
    return float(value) if kind == "float" and not isinstance(default, int) else value


def _request_options(workloads: Sequence[Any], given: Mapping[str, Any]) -> tuple[SimpleNamespace, list[str]]:
    """The namespace ``run_cmd.parse`` reads, every option at ``stackwars run``'s default unless given,
    and the names given."""
    params = _parameters()
    given = {("set_" if k == "set" else "json_out" if k == "json" else k): v for k, v in given.items()}
    unknown = sorted(set(given) - set(params))
    if unknown:
        raise SpecError(f"stackwars.run takes no option {', '.join(unknown)}; it takes those of `stackwars run`: "
                        f"{', '.join(sorted(n.rstrip('_') for n in params))}")
    values = {n: _default(p) for n, p in params.items()}
    values.update({n: _coerce(n, v, params[n]) for n, v in given.items()})
    names = [_workload_name(w) for w in workloads]
    return SimpleNamespace(workloads=names or None, verbose=False, **values), [
        *(["workloads"] if names else []), *given]


def _workload_name(w: Any) -> str:
    """A built-in name, ``file.py:NAME``, or a ``stackwars.Model`` object (one defined in a notebook
    cell: sent to the workers by value, discovery.send_model)."""
    from stackwars.model import Model

    if isinstance(w, Model):
        from stackwars.discovery import send_model

        return send_model(w)
    if not isinstance(w, str):
        raise SpecError(f"a workload is a name (see `stackwars list`), 'file.py:NAME' or a stackwars.Model; got "
                        f"{type(w).__name__}")
    return w


class RunInterrupted(KeyboardInterrupt):
    """``stackwars.run`` stopped (the kernel's stop button, Ctrl-C): what was measured is stored, and
    ``stackwars.run(resume=run_id, db=db)`` goes on from there."""

    def __init__(self, run_id: str, db: Path):
        self.run_id, self.db = run_id, Path(db)
        self.resume = f"stackwars.run(resume={run_id!r}, db={str(db)!r})"
        super().__init__(f"run {run_id} interrupted: finished cells are stored in {db}; continue with {self.resume}")


def run(*workloads: Any, resume: str | None = None, progress: bool = True, **options: Any) -> "Result":
    """Measure ``workloads`` as ``stackwars run`` does and return the run's ``Result``.

    ``workloads``: built-in names (``"gemm"``), ``"file.py:NAME"``, or ``stackwars.Model`` objects
    (one defined in a notebook cell is sent to the workers by value). ``options``: those of
    ``stackwars run`` by their Python names, with its defaults (``preset="tiny"``,
    ``backend=["torch-eager", "jax-jit"]``, ``processes=3``, ``db="results.db"``, ``set={"n": 2}``;
    ``stackwars.api.options()`` lists them). ``resume``: a stopped run's id, measured on from where
    it stopped. ``progress``: a live bar (in Jupyter too).

    Bad input raises ``SpecError`` (the command line's message, nothing written); an interrupt
    raises ``RunInterrupted`` (a KeyboardInterrupt) naming the call that resumes; cells the
    database could not store raise ``orchestrate.Unsaved``, kept for the resume to store. A cell
    that fails (error, timeout, parity) is a result: its status is in ``Result.cells``."""
    from stackwars.cli import run_cmd
    from stackwars.cli.common import waiting

    if resume is not None:
        if workloads:
            raise SpecError("resume= measures what the stored run planned; give no workloads with it")
        options = {**options, "resume": resume}
    notes: list[str] = []

    def note(text: str) -> None:  # shown as the command shows it, and kept with the result
        from stackwars.cli.common import err

        notes.append(text)
        err.print(text, highlight=False)

    o, given = _request_options(workloads, options)
    request = dataclasses.replace(run_cmd.parse(given, o, note), command=_call_text(workloads, options))
    ready = orchestrate.prepare(request)
    opened: dict[str, str] = {}

    @contextlib.contextmanager
    def measuring(the_run):
        opened["run_id"] = the_run.run_id
        if progress and _in_notebook():  # a bar Jupyter renders, updated in place
            with _interruptible():
                yield NotebookBar(the_run.run_id, len(the_run.specs)).hooks(note)
            return
        with _progress(progress) as bar:
            hooks = (run_cmd._hooks(bar, len(the_run.specs), ready.executor.name, lines=False) if bar is not None
                     else orchestrate.Hooks())
            yield dataclasses.replace(hooks, on_note=note)

    try:
        run_id = orchestrate.execute(request, ready, measuring, note, waiting)
    except KeyboardInterrupt as exc:
        if "run_id" not in opened:
            raise
        raise RunInterrupted(opened["run_id"], request.db) from exc
    result = verdict([run_id], db=str(request.db) if "db" in options else None)
    result.notes = notes
    return result


def _interruptible():
    """SIGTERM and SIGHUP stop the run as Ctrl-C does (cli.common.interruptible), where signals can be
    handled: the main thread."""
    from stackwars.cli.common import interruptible

    return interruptible() if threading.current_thread() is threading.main_thread() else contextlib.nullcontext()


@contextlib.contextmanager
def _progress(show: bool):
    """A live bar where the output is a terminal (the command's), else nothing."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from stackwars.cli.common import err

    if not show:
        with _interruptible():
            yield None
        return
    with _interruptible(), Progress(TextColumn("{task.description}", style="bold"), BarColumn(bar_width=20),
                                    MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as bar:
        yield bar


def _in_notebook() -> bool:
    """Whether this is a Jupyter kernel (a notebook, JupyterLab, nbclient): its output is HTML updated in place."""
    import sys

    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class NotebookBar:
    """The run's progress in a notebook: one HTML output (a ``<progress>`` bar, the cell being
    measured, cell-processes done of those planned, the time so far, the run's notes), updated in
    place through its display id: Jupyter, JupyterLab and nbclient render it without ipywidgets.
    The kernel's stop button interrupts the run (``RunInterrupted``)."""

    def __init__(self, run_id: str, total: int):
        import time

        from IPython.display import HTML, display

        self.run_id, self.total, self.done, self.now, self.notes = run_id, total, 0, "starting", []
        self.clock, self.start = time.monotonic, time.monotonic()
        self._html = HTML
        self.handle = display(HTML(self.html()), display_id=True)

    def html(self) -> str:
        seconds = self.clock() - self.start
        notes = "".join(f"<div>{html.escape(n)}</div>" for n in self.notes[-5:])
        return (f'<div class="stackwars-progress"><b>run {html.escape(self.run_id)}</b> '
                f'<progress value="{self.done}" max="{max(self.total, 1)}"></progress> '
                f"{self.done}/{self.total} cell-processes, {seconds:.0f} s · {html.escape(self.now)}{notes}</div>")

    def _show(self) -> None:
        self.handle.update(self._html(self.html()))

    def hooks(self, note) -> orchestrate.Hooks:
        def on_start(spec):
            self.now = spec.key
            self._show()

        def on_done(m):
            self.done += 1
            self._show()

        def on_more(n):
            self.total += n
            self._show()

        def on_note(text):
            self.notes.append(text)
            note(text)
            self._show()

        return orchestrate.Hooks(on_start=on_start, on_done=on_done, on_more=on_more, on_note=on_note)


def _call_text(workloads: Sequence[Any], options: Mapping[str, Any]) -> str:
    """The call, as stored with the run (a run's ``command``)."""
    args = [repr(w if isinstance(w, str) else getattr(w, "name", w)) for w in workloads]
    args += [f"{k}={v!r}" for k, v in options.items()]
    return f"stackwars.run({', '.join(args)})"


def verdict(run_ids: str | Sequence[str] | None = None, db: str | Path | None = None,
            threshold: float | None = None) -> "Result":
    """The verdict of stored runs (default: the latest run of ``db``), as ``stackwars verdict`` reads it."""
    from stackwars import verdict as vd
    from stackwars.cli.common import number
    from stackwars.cli.verdict_cmd import load
    from stackwars.store.results import Store, check_db

    if threshold is not None:
        number(threshold, "threshold", low=0, high=0.5)
    ids = [run_ids] if isinstance(run_ids, str) else list(run_ids or [])
    path = check_db(db, create=False, flag="db=")
    with Store(path, create=False) as store:
        ids, found, profiles, anatomy = load(store, ids or None)
    decided = vd.verdicts(found, profiles, anatomy, threshold=threshold, db=str(db) if db is not None else None)
    return Result(list(ids), path, found, decided, threshold, None if db is None else str(db))


@dataclasses.dataclass(frozen=True)
class VerdictRow:
    """One row of the verdict: a workload (preset, phase, dtype, device) on a machine, each side's best
    mode and its time, JAX/PyTorch with its CI at the row's level, the verdict and its reason, and the
    command that measures the row again. ``details``: everything ``stackwars verdict -f json`` holds."""

    workload: str
    preset: str
    phase: str
    dtype: str
    device: str
    machine: str
    best_torch: str | None
    best_jax: str | None
    torch_s: float | None
    jax_s: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    level: float | None
    verdict: str
    reason: str
    again: str | None
    details: Mapping[str, Any] = dataclasses.field(repr=False, compare=False)

    @classmethod
    def of(cls, v: Mapping[str, Any]) -> "VerdictRow":
        return cls(str(v["workload"]), str(v["preset"]), str(v["phase"]), str(v.get("dtype")), str(v.get("device")),
                   str(v.get("machine")), v.get("best_torch"), v.get("best_jax"), v.get("torch_s"), v.get("jax_s"),
                   v.get("ratio"), v.get("ci_low"), v.get("ci_high"), v.get("confidence"), str(v["verdict"]),
                   str(v.get("reason") or ""), v.get("command"), dict(v))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "details"}


@dataclasses.dataclass
class Result:
    """Runs and their verdict: what ``stackwars.run`` and ``stackwars.verdict`` return."""

    run_ids: list[str]
    db: Path
    rows: list[dict[str, Any]] = dataclasses.field(repr=False)  # each cell-process, as every reader reads it
    verdicts: list[dict[str, Any]] = dataclasses.field(repr=False)  # the verdict rows, every detail
    threshold: float | None = None
    db_option: str | None = dataclasses.field(default=None, repr=False)  # as given: named in printed commands
    notes: list[str] = dataclasses.field(default_factory=list, repr=False)  # what the run said (its twin check's)

    @property
    def run_id(self) -> str:
        """The run (a result of several runs: the last)."""
        return self.run_ids[-1]

    @property
    def verdict(self) -> list[VerdictRow]:
        return [VerdictRow.of(v) for v in self.verdicts]

    @property
    def cells(self):
        """Every cell-process as a pandas DataFrame (a row each: ``stackwars export``'s columns)."""
        import pandas as pd

        return pd.DataFrame(self.rows)

    def to_pandas(self):
        """The verdict as a pandas DataFrame, a row a verdict row (``VerdictRow``'s fields)."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.verdict])

    def to_json(self, path: str | Path | None = None) -> str:
        """``stackwars verdict -f json``'s document; written to ``path`` too where given (a new file or one
        of ours: outputs.write's rules)."""
        from stackwars import outputs
        from stackwars.cli.verdict_cmd import to_json
        from stackwars.report import verdict as view

        text = to_json(self.verdicts, self.run_ids, self.threshold, view.mixed_machines(self.rows))
        if path is not None:
            outputs.check(Path(path), "path", [self.db])
            outputs.write(Path(path), text, "path")
        return text

    def brief(self, width: int = 100) -> str:
        """The verdict at a glance, as ``stackwars run`` ends with it."""
        from stackwars.report import verdict as view

        if not self.verdicts:
            return f"runs {', '.join(self.run_ids)} hold no cells to decide on"
        return "\n".join(view.brief(self.verdicts, self.run_ids, width, self.threshold, self.db_option))

    def explain(self, width: int = 160) -> str:
        """Every row's details, as ``stackwars verdict --explain`` prints them."""
        from stackwars.report import format as fmt
        from stackwars.report import verdict as view

        console = fmt.text_console(width)
        console.print(view.render(self.verdicts, width, self.threshold), crop=False)
        return console.export_text()

    def forest_png(self) -> bytes | None:
        from stackwars.report import verdict as view

        return view.forest_png(self.verdicts, self.threshold) if self.verdicts else None

    def __str__(self) -> str:
        return self.brief()

    def __repr__(self) -> str:  # the answer where a notebook shows text (a console, a plain-text front end)
        return self.brief()

    def _repr_html_(self) -> str:
        """In a notebook: the brief verdict, and the forest plot as the report draws it."""
        png = self.forest_png()
        img = (f'<img alt="JAX/PyTorch per row, with its CI" src="data:image/png;base64,'
               f'{base64.b64encode(png).decode()}"/>' if png else "")
        return f'<div class="stackwars-result"><pre>{html.escape(self.brief())}</pre>{img}</div>'
