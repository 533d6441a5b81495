"""Command line: one thin module per subcommand, each wrapping plain Python functions."""

from __future__ import annotations

from typing import Optional

import typer
from typer.core import TyperGroup

from stackwars import __version__, discovery
from stackwars.cli.common import OneValueCommand as _Command, refuse_empty_values
from stackwars.cli import (compare_cmd, describe_cmd, export_cmd, fidelity_cmd, ir_cmd, list_cmd, merge_cmd,
                           peaks_cmd, report_cmd, reproduce_cmd, run_cmd, scaling_cmd, show_cmd, study_cmd, train_cmd, verdict_cmd)

class _Group(TyperGroup):
    """The top command: it sees every argument as typed, before any is converted."""

    def parse_args(self, ctx, args):
        refuse_empty_values(args)
        return super().parse_args(ctx, args)


app = typer.Typer(cls=_Group, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="JAX or PyTorch, which execution mode, for this workload, and why: honest measurements.")


def _version(value: bool) -> None:
    if value:
        print(f"stackwars {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                                 help="print the version and exit")) -> None:
    """JAX or PyTorch, which execution mode, for this workload, and why: honest measurements."""


app.command("list", cls=_Command)(list_cmd.list_)
app.command("run", cls=_Command)(run_cmd.run)
app.command("describe", cls=_Command)(describe_cmd.describe)
app.command("verdict", cls=_Command)(verdict_cmd.verdict)
app.command("show", cls=_Command)(show_cmd.show)
app.command("runs", cls=_Command)(show_cmd.runs)
app.command("export", cls=_Command)(export_cmd.export)
app.command("compare", cls=_Command)(compare_cmd.compare)
app.command("merge", cls=_Command)(merge_cmd.merge)
app.command("report", cls=_Command)(report_cmd.report)
app.command("reproduce", cls=_Command)(reproduce_cmd.reproduce)
app.command("peaks", cls=_Command)(peaks_cmd.peaks)
app.command("fidelity", cls=_Command)(fidelity_cmd.fidelity)
app.command("train", cls=_Command)(train_cmd.train)
app.command("ir", cls=_Command)(ir_cmd.ir)
study_cmd.app.command("scaling", cls=_Command)(scaling_cmd.scaling)
app.add_typer(study_cmd.app, name="study")


def main(args: list[str] | None = None) -> None:
    """The ``stackwars`` command. A parse error (an unknown option, a missing argument, a value
    of the wrong type) is one plain line on stderr, like every other bad input, exit 2: click's
    own form is a four-line box around the same sentence."""
    import sys

    from typer import _click as click

    try:
        result = app(args=args, standalone_mode=False, prog_name="stackwars")
    except click.exceptions.NoArgsIsHelpError as exc:  # ``stackwars study``: its help, as before
        exc.show()
        _exit(exc.exit_code)
    except click.exceptions.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        where = f"; see {ctx.command_path} --help" if ctx is not None else ""
        print(f"error: {exc.format_message()}{where}", file=sys.stderr)
        _exit(exc.exit_code)
    except typer.Abort:  # typer._click has no Abort: naming it there broke every other exception
        print("interrupted", file=sys.stderr)
        _exit(130)
    except BaseException as exc:
        if not _a_rank():
            raise
        if not isinstance(exc, SystemExit):  # said as Python says it, then ended as a rank is
            import traceback
            traceback.print_exc()
        _exit(exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1)
    if isinstance(result, int) and not isinstance(result, bool):  # typer.Exit(code) in this mode
        _exit(result)
    if _a_rank():
        _exit(0)
    discovery.leave_if_user_threads(0)


def _a_rank() -> bool:
    """Whether this process was a rank of an external PyTorch job (``study scaling --launcher
    external`` under torchrun): it ends without the interpreter's teardown (torch_rank.end_process)."""
    import sys

    sweep = sys.modules.get("stackwars.studies.scaling.sweep")
    return sweep is not None and sweep.left_a_group()


def _exit(code: int) -> None:
    import sys

    discovery.leave_if_user_threads(code)  # a model file's thread would keep the interpreter from ending
    if _a_rank():
        from stackwars.studies.scaling.torch_rank import end_process
        end_process(code)
    sys.exit(code)
