"""The ``opbench`` command line: the typer app, its global flags, and the commands of
:mod:`opbench.commands` registered on it (each module owns one area: ``run`` in
:mod:`opbench.commands.run`, and so on; what they share is in
:mod:`opbench.commands.common`). Thin: parse flags, call the library.

Exit codes (DESIGN.md): 0 done (and above ``--fail-under`` if given), 1 below the bar,
2 bad usage or input, 3 (``run``) incomplete: the harness could not plan or judge some
tests (``judge_error``). Bad input gets one clear line, no traceback unless ``--debug``.
"""

from __future__ import annotations

import logging
import os
import sys

import typer

from opbench.commands import (
    agent,
    backends,
    dataset,
    programs,
    report,
    repro,
    run,
    selftest,
)
from opbench.commands.common import console, state

__all__ = ["COMMAND_MODULES", "app", "main"]

app = typer.Typer(
    name="opbench",
    help="Judge PyTorch operator backends: is it correct, is it faster, does it work in a real model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Modules that add commands with ``register(app)``, in the order ``--help`` lists them.
COMMAND_MODULES = (run, dataset, backends, selftest, repro, report, agent, programs)


@app.callback()
def _main(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks and debug logs."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="More log output."),
) -> None:
    state["debug"] = debug
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


for _module in COMMAND_MODULES:
    _module.register(app)


def main() -> None:
    from opbench.run.bytecode_cache import use_bytecode_cache

    try:
        use_bytecode_cache()  # before torch: where Python writes no bytecode, each process
    except ValueError as e:  # compiles what it imports from source (seconds a process)
        console.print(f"error: {e}", markup=False)
        sys.exit(2)
    try:
        app()
    except SystemExit as e:  # typer always leaves this way, with the command's exit code
        _leave(e)
    except KeyboardInterrupt:
        console.print("interrupted; finished results are in the run directory (use --resume)")
        # Leave without the interpreter's teardown: a harness thread may still be inside a
        # torch call (planning a test's references) when Ctrl-C ends the main thread, and
        # tearing the runtime down under it aborted the process now and then ("terminate
        # called without an active exception", exit -6 instead of 130; seen in CI). Every
        # finished result is already committed to the run's store; workers, templates and
        # a local Ray are stopped by the executor or die with this process.
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(130)


def _leave(done: SystemExit) -> None:
    """Exit with ``done``'s code without the interpreter's teardown: freeing the imported
    modules (torch, the OpInfo database, Ray) took 1.1-1.4 s of a 9 s run on the 2-core
    CPU (2026-11-28), after every result was written and every file closed. What Python's
    exit does first is done as it does it: wait for the threads that are not daemons
    (``threading._shutdown``, which also stops idle thread pools), then the ``atexit``
    handlers (Ray's shutdown, temporary folders, multiprocessing's children)."""
    import atexit
    import threading

    code = done.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    wait_for_threads = getattr(threading, "_shutdown", None)
    if wait_for_threads is None:  # another Python: its own exit, teardown included
        raise done
    wait_for_threads()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code or 0)


if __name__ == "__main__":
    main()
