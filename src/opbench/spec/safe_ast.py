"""``ast.parse`` for a harness that parses on several threads at once.

CPython 3.11 keeps the AST constructor's recursion depth in state the threads share, so
two threads parsing at once can fail with ``SystemError: AST constructor recursion depth
mismatch`` (python/cpython#106905). CI hit it on 2026-11-27: two slots' planning threads
parsed trace arguments at the same time, and a test was recorded as a ``judge_error``.
Every parse in opbench goes through :func:`parse`, which takes one lock.

Our own parses were not the only ones: Python 3.11's ``traceback`` parses the source
line of each frame it prints (to place its ``^~~`` carets), so a slot logging a harness
error's traceback raced another slot's planning parse (CI, 2026-12-01:
``test_slot_errors.py``'s run recorded that ``judge_error`` and so did not fail as the
test expected). On Pythons with the bug, importing this module therefore routes
``ast.parse`` itself through the same lock (re-entrant: a parse that triggers another
on its own thread waits for nothing).
"""

from __future__ import annotations

import ast
import sys
import threading
from typing import Any

__all__ = ["parse"]

_LOCK = threading.RLock()
#: ``ast.parse`` as the standard library defines it, before :func:`_install` wraps it.
_PARSE = getattr(ast.parse, "__wrapped__", ast.parse)


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """:func:`ast.parse`, one thread at a time."""
    with _LOCK:
        return _PARSE(source, filename=filename, mode=mode)


def _locked_parse(*args: Any, **kwargs: Any) -> Any:
    """``ast.parse`` for every caller (``traceback``'s included), under the lock."""
    with _LOCK:
        return _PARSE(*args, **kwargs)


def _install() -> None:
    """Route ``ast.parse`` through the lock where CPython has the bug (before 3.13)."""
    if sys.version_info < (3, 13) and getattr(ast.parse, "__wrapped__", None) is None:
        _locked_parse.__wrapped__ = _PARSE  # type: ignore[attr-defined]
        ast.parse = _locked_parse  # type: ignore[assignment]


_install()
