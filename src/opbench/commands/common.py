"""What every CLI command shares: the consoles, the invocation's state (``--debug``),
:func:`fail` for bad usage or input, and the ``--device`` check. A leaf of the CLI:
:mod:`opbench.cli` and every module of :mod:`opbench.commands` import it, and it imports
none of them.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console

__all__ = ["console", "device_option", "fail", "out_console", "state"]

#: Progress, messages and errors (stderr).
console = Console(stderr=True)
#: Tables and reports (stdout).
out_console = Console()

#: What the app's callback set for this invocation: ``debug`` (``--debug``: tracebacks
#: instead of one line).
state: dict[str, Any] = {"debug": False}


def fail(message: str, code: int = 2) -> None:
    """Print one clear line and exit (used for bad usage or input): never wrapped by
    rich (a file path and line number stay on one line for the terminal to wrap, and
    for tools that grep the output), the message never read as markup."""
    from rich.markup import escape

    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def device_option(device: str) -> str:
    """``--device`` as ``cpu``, ``cuda`` or ``cuda:N`` that torch can use, else a usage
    error (:func:`fail`)."""
    import torch

    try:
        dev = torch.device(device)
    except RuntimeError:
        fail(f"unknown device {device!r}; use cpu, cuda or cuda:N")
        raise
    if dev.type not in ("cpu", "cuda"):
        fail(f"--device must be cpu or cuda, not {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        fail("--device cuda asked, but torch sees no CUDA device")
    return str(dev)
