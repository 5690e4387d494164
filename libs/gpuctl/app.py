"""The gpuctl command line: one Typer app, one module per noun under commands/, one exit-code policy."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from libs.gpuctl.client import ExitCode, GpuctlError
from libs.gpuctl.commands import REGISTRARS
from libs.gpuctl.session import Session, session_of

__all__ = ["app", "hoist_globals", "main"]

app = typer.Typer(
    name="gpuctl",
    help="gpucloud from a terminal: capacity, workloads, alerts, incidents, bills.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # a traceback's locals would print the API key
    context_settings={"help_option_names": ["-h", "--help"]},
)
for register in REGISTRARS:
    register(app)

#: Options of the root that may be written anywhere before ``--``, as kubectl users do.
_GLOBAL_FLAGS = frozenset({"-q", "--quiet"})
_GLOBAL_VALUED = "--context"


@app.callback()
def _root(
    ctx: typer.Context,
    context: Annotated[
        str | None,
        typer.Option("--context", metavar="NAME", help="Login context (or GPUCTL_CONTEXT)."),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bars or notes; ids only.")
    ] = False,
) -> None:
    session = session_of(ctx)
    session.context_flag = context or session.context_flag
    session.quiet = quiet or session.quiet
    ctx.call_on_close(session.close)


def hoist_globals(args: Sequence[str]) -> list[str]:
    """``--quiet``/``-q`` and ``--context NAME`` moved in front of the command, wherever they were written."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg in _GLOBAL_FLAGS or arg.startswith(_GLOBAL_VALUED + "="):
            front.append(arg)
        elif arg == _GLOBAL_VALUED and i + 1 < len(args):
            front += [arg, args[i + 1]]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


def main(argv: Sequence[str] | None = None, *, session: Session | None = None) -> int:
    """Run one command; the exit status says what went wrong (docs/cli.md, "Exit codes")."""
    args = hoist_globals(sys.argv[1:] if argv is None else argv)
    try:
        result = app(args=args, obj=session, prog_name="gpuctl", standalone_mode=False)
    except GpuctlError as exc:
        sys.stdout.flush()
        sys.stderr.write(exc.line() + "\n")
        return int(exc.exit_code)
    except typer.TyperException as exc:  # usage: a bad option, a missing argument (exit 2)
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            sys.stderr.write(f"error: {exc.format_message()}\n")
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("interrupted\n")
        return 130
    return result if isinstance(result, int) else int(ExitCode.OK)
