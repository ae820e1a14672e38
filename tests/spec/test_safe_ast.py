"""Parsing is serialised: CPython 3.11's AST constructor shares its recursion depth
between threads, and two parses at once failed a CI run with ``SystemError: AST
constructor recursion depth mismatch`` (two slots' planning threads parsing trace args;
later a slot's planning parse and another's traceback, which parses source lines to
place its carets)."""

from __future__ import annotations

import ast
import sys
import threading
import time
import traceback

import pytest

from opbench.spec import safe_ast
from opbench.spec.args import parse_args


def _most_at_once(monkeypatch, *jobs) -> tuple[int, set[int]]:
    """The most parses in flight at once while ``jobs`` run on threads of their own, each
    5 times (every parse slowed to 10 ms so that overlaps, where allowed, happen), and
    the jobs whose parses went through the lock (by position)."""
    seen: set[int] = set()
    inside = 0
    most = 0
    guard = threading.Lock()
    real = safe_ast._PARSE

    def slow_parse(*args, **kwargs):
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
            seen.add(getattr(threading.current_thread(), "job", -1))
        time.sleep(0.01)
        try:
            return real(*args, **kwargs)
        finally:
            with guard:
                inside -= 1

    monkeypatch.setattr(safe_ast, "_PARSE", slow_parse)
    threads = [threading.Thread(target=lambda job=job: [job() for _ in range(5)]) for job in jobs]
    for i, t in enumerate(threads):
        t.job = i  # type: ignore[attr-defined]
        t.start()
    for t in threads:
        t.join()
    return most, seen


def test_no_two_threads_parse_at_once(monkeypatch):
    parse = lambda: parse_args("((T([2], f32),), {})")  # noqa: E731
    assert _most_at_once(monkeypatch, parse, parse, parse, parse) == (1, {0, 1, 2, 3})


def _traceback_with_carets() -> str:
    """A traceback whose last frame's line Python 3.11 parses to place its carets."""
    try:
        x = [1][2] + 3
        return str(x)
    except IndexError:
        return traceback.format_exc()


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="CPython fixed the shared state")
def test_a_traceback_waits_for_a_planning_parse(monkeypatch):
    """``ast.parse`` as the standard library's callers reach it (``traceback``'s caret
    placement here) takes the same lock as opbench's own parses."""
    assert "~~~^^^" in _traceback_with_carets()  # the line was parsed
    parse = lambda: parse_args("((T([2], f32),), {})")  # noqa: E731
    jobs = (parse, _traceback_with_carets, _traceback_with_carets)
    assert _most_at_once(monkeypatch, *jobs) == (1, {0, 1, 2})


def test_parse_is_ast_parse():
    tree = safe_ast.parse("(1, {'a': 2})", mode="eval")
    assert ast.dump(tree) == ast.dump(safe_ast._PARSE("(1, {'a': 2})", mode="eval"))
