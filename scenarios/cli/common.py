"""What every ``podsim`` command shares: the consoles, the common options and the error guard.

One definition of each option (``--set``, ``--seed``, ``--force``) so that ``run``, ``trace``,
``validate``, ``show`` and ``cost`` spell, document and range-check them the same way; and one
error guard (:func:`guarded`) that every command goes through:

- bad input (:class:`podsim.scenarios.errors.ScenarioError`, or any ``ValueError``, which the layers
  below raise for bad parameters) prints one paragraph and exits with status 2;
- Ctrl-C exits with 130; running out of memory (which the size estimates of
  :mod:`podsim.scenarios.build.limits` should have prevented) is reported as such, status 2;
- anything else is a bug: one paragraph ("internal error", the exception, the file its
  traceback was saved to and a request to report it) and status 1. The traceback itself is
  printed only with ``podsim --debug ...`` or ``PODSIM_DEBUG=1``.
"""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from podsim.scenarios.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    ScenarioError,
    printable,
    save_traceback,
)
from rich.console import Console

__all__ = [
    "ForceOpt",
    "SeedOpt",
    "SetOpt",
    "debug_enabled",
    "err_console",
    "fail",
    "guarded",
    "out_console",
    "set_debug",
]

out_console = Console(soft_wrap=True, highlight=False)
err_console = Console(stderr=True, soft_wrap=True, highlight=False)

F = TypeVar("F", bound=Callable[..., Any])

SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a key: key.path=value (YAML value); repeatable."),
]
#: the range is the scenario's ``seed:`` key's (0 .. 2**32-1), checked by the schema so that
#: ``--seed`` and ``--set seed=`` give the same message
SeedOpt = Annotated[
    int | None,
    typer.Option("--seed", help="Random seed, 0 to 4294967295 (overrides seed:)."),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Go on even if the size estimate is over the budget (a cluster larger than the "
        "machine's memory is refused anyway).",
    ),
]

_DEBUG = {"on": False}


def set_debug(on: bool) -> None:
    """Print tracebacks of internal errors (``podsim --debug``)."""
    _DEBUG["on"] = bool(on)


def debug_enabled() -> bool:
    """``podsim --debug`` was given or ``PODSIM_DEBUG`` is set to something other than 0."""
    env = os.environ.get("PODSIM_DEBUG", "").strip().lower()
    return _DEBUG["on"] or env not in ("", "0", "false", "no", "off")


def fail(message: str, code: int) -> None:
    """Print ``message`` (no markup) on stderr and exit with ``code``."""
    err_console.print(printable(message), markup=False)
    raise typer.Exit(code)


def _print_traceback(exc: BaseException) -> None:
    if debug_enabled():
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        err_console.print(text.rstrip(), markup=False)


def guarded(fn: F) -> F:
    """Turn every failure of a command into a clean message and exit status (see the module
    docstring); a traceback only with ``--debug`` / ``PODSIM_DEBUG=1``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except ScenarioError as exc:
            _print_traceback(exc)
            fail(f"error: {exc}", exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted.", EXIT_INTERRUPTED)
        except MemoryError as exc:
            _print_traceback(exc)
            # the size estimates let this through: say so, not "internal error"
            fail(
                f"error: out of memory ({exc or 'MemoryError'}). This scenario is too large "
                "for this machine; make it smaller (cluster, tokens, layers, steps), or use "
                "engine: flow.",
                EXIT_BAD_INPUT,
            )
        except (FileNotFoundError, NotADirectoryError, ValueError) as exc:
            _print_traceback(exc)
            fail(f"error: {exc}", EXIT_BAD_INPUT)
        except Exception as exc:
            from podsim.fabric.invariants import InvariantViolation

            _print_traceback(exc)
            if isinstance(exc, InvariantViolation):  # a model bug caught by the checks
                fail(f"error: the run stopped. {exc}", EXIT_INTERNAL)
            path = save_traceback(exc)
            fail(
                f"internal error: {type(exc).__name__}: {exc}. This is a bug in podsim, not in "
                f"your input; please report it with the traceback saved in {path} (run again "
                "with podsim --debug or PODSIM_DEBUG=1 to print it).",
                EXIT_INTERNAL,
            )
        return None

    return wrapper  # type: ignore[return-value]
