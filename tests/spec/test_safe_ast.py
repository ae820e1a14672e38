"""Parsing is serialised: CPython 3.11's AST constructor shares its recursion depth
between threads, and two parses at once failed a CI run with ``SystemError: AST
constructor recursion depth mismatch`` (two slots' planning threads parsing trace args)."""

from __future__ import annotations

import ast
import threading
import time

from opbench.spec import safe_ast
from opbench.spec.args import parse_args


def test_no_two_threads_parse_at_once(monkeypatch):
    inside = 0
    most = 0
    guard = threading.Lock()
    real = ast.parse

    def slow_parse(*args, **kwargs):
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.01)
        try:
            return real(*args, **kwargs)
        finally:
            with guard:
                inside -= 1

    monkeypatch.setattr(ast, "parse", slow_parse)
    threads = [
        threading.Thread(target=lambda: [parse_args("((T([2], f32),), {})") for _ in range(5)])
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1


def test_parse_is_ast_parse():
    tree = safe_ast.parse("(1, {'a': 2})", mode="eval")
    assert ast.dump(tree) == ast.dump(ast.parse("(1, {'a': 2})", mode="eval"))
