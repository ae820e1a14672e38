"""``ast.parse`` for a harness that parses on several threads at once.

CPython 3.11 keeps the AST constructor's recursion depth in state the threads share, so
two threads parsing at once can fail with ``SystemError: AST constructor recursion depth
mismatch`` (python/cpython#106905). CI hit it on 2026-11-27: two slots' planning threads
parsed trace arguments at the same time, and a test was recorded as a ``judge_error``.
Every parse in opbench goes through :func:`parse`, which takes one lock.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse"]

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """:func:`ast.parse`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
