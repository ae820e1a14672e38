"""Static scan of candidate kernel sources: flag code that reaches for the judge.

Contract: the trusted harness calls :func:`scan_files` on a kernel folder (every ``.py``
file, sibling helpers included) *before* any worker imports it. The scan reads the text
with :mod:`ast` only; it never imports, compiles for execution or runs the scanned code,
so a hostile file can at worst make the scan report it. Findings of severity
``tampering`` fail the operator (category ``tampering``); ``warning`` findings are shown
in the report; a rule the user exempted with ``--allow RULE`` still reports its
findings, with severity ``allowed``. Tampering inside a top-level ``if __name__ ==
"__main__":`` block is reported as a warning, because the loader imports kernels under
another name, unless the file could rename itself (writes ``__name__``, or names it in
a string or keyword).

Names are resolved before matching: imports and their aliases (``import torch as t``,
``from torch.utils import _python_dispatch as pd``), assignments of them (``T =
torch.Tensor``, tuple unpacking, ``for m in (torch, np)``, default arguments),
attribute chains, ``getattr(x, "const")``, ``setattr``/``delattr``/``object.__setattr__``,
``__import__``/``importlib.import_module``/``eval`` of a constant, ``X.__dict__["k"]``,
``vars(X)["k"]``, ``sys.modules["k"]``, ``globals()["k"]``, and modules reached through
another module (``os.sys.modules`` is ``sys.modules``). String constants are folded
through ``+`` and f-strings without placeholders. ``exec``/``eval``/``compile`` of a
constant string scans that string as code, reported at the call.

What it cannot see (it is one layer; the guard, which watches the kernel run, catches
the rest): names computed at run time (``getattr(torch, name)`` is unknown;
``setattr(torch, name, f)`` is still flagged, its receiver being known); the payload of
``exec`` of decoded bytes (flagged as ``dynamic-code``, never decoded); code written to
a file at run time and then imported (only ``file-access`` and ``dynamic-import``
warnings: big kernel libraries generate code that way); objects passed
through function arguments, return values, containers or class attributes (``mods =
[torch]; mods[0].equal = f``); what imported modules do (the allow-listed
:data:`ALLOWED_OPBENCH_MODULES` must stay free of judge imports); compiled extensions and
Triton code (only the Python around a ``@triton.jit`` body matters here). Aliases are
file-wide, not scoped: a name bound to a module anywhere counts as that module
everywhere, which errs towards reporting. The rule table is :data:`RULES` (in :mod:`opbench.judge.scan_rules`, with the name
tables it matches against); :func:`rules_markdown` renders it as markdown. Name
resolution over the AST is :mod:`opbench.judge.scanner`'s; this module owns the entry
points (:func:`scan_source`, :func:`scan_files`, :func:`tampering`,
:func:`format_findings`) and re-exports the rule table's public names.
"""

from __future__ import annotations

import tokenize
from collections.abc import Iterable
from pathlib import Path

from opbench.judge.scan_rules import (
    ALLOWED,
    ALLOWED_OPBENCH_MODULES,
    RULES,
    TAMPERING,
    WARNING,
    Finding,
    Rule,
    rules_markdown,
)
from opbench.judge.scanner import Scanner
from opbench.spec import safe_ast

__all__ = [
    "ALLOWED",
    "ALLOWED_OPBENCH_MODULES",
    "RULES",
    "TAMPERING",
    "WARNING",
    "Finding",
    "Rule",
    "format_findings",
    "rules_markdown",
    "scan_files",
    "scan_source",
    "tampering",
]


def scan_source(
    source: str, filename: str = "<kernel>", *, allow: frozenset[str] | set[str] = frozenset()
) -> list[Finding]:
    """Findings for one source text, sorted by position, at most one per rule and line.

    ``allow`` holds rule ids the user exempted: their findings come back with severity
    ``allowed``. An unknown id raises :class:`ValueError` (a typo must not silently exempt
    nothing). A file that does not parse gives one ``syntax-error`` warning: its import
    fails and is reported anyway.
    """
    unknown = set(allow) - RULES.keys()
    if unknown:
        raise ValueError(f"unknown rule id(s) in allow: {', '.join(sorted(unknown))}")
    try:
        tree = safe_ast.parse(source, filename=filename)
    except (RecursionError, MemoryError):
        found = [Finding("unscannable", TAMPERING, filename, 0, 0, "nested too deeply to parse")]
    except (SyntaxError, ValueError) as e:
        msg = f"does not parse: {getattr(e, 'msg', None) or e}"
        found = [Finding("syntax-error", WARNING, filename, getattr(e, "lineno", 0) or 0, 0, msg)]
    else:
        found = Scanner(source, filename).scan(tree)
    seen: set[tuple[str, int]] = set()
    out = []
    for f in sorted(found, key=lambda f: (f.line, f.col, f.rule)):
        if (f.rule, f.line) not in seen:
            seen.add((f.rule, f.line))
            out.append(_allowed(f, allow))
    return out


def _allowed(f: Finding, allow: frozenset[str] | set[str]) -> Finding:
    return Finding(f.rule, ALLOWED, f.file, f.line, f.col, f.message) if f.rule in allow else f


def scan_files(
    paths: Iterable[str | Path],
    *,
    allow: frozenset[str] | set[str] = frozenset(),
    root: Path | None = None,
) -> list[Finding]:
    """Findings for several files, named relative to ``root`` when given.

    A file that cannot be read or decoded (the encoding is detected as Python's import
    detects it) gives one ``unreadable`` warning: its import fails as well.
    """
    out: list[Finding] = []
    for p in map(Path, paths):
        name = p.as_posix()
        if root is not None:
            try:
                name = p.resolve().relative_to(Path(root).resolve()).as_posix()
            except ValueError:
                pass
        try:
            with tokenize.open(p) as fh:
                source = fh.read()
        except (OSError, UnicodeDecodeError, SyntaxError) as e:
            f = Finding("unreadable", WARNING, name, 0, 0, f"cannot read: {type(e).__name__}: {e}")
            out.append(_allowed(f, allow))
            continue
        out.extend(scan_source(source, name, allow=allow))
    return out


def tampering(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that fail the operator."""
    return [f for f in findings if f.severity == TAMPERING]


def format_findings(findings: Iterable[Finding]) -> str:
    """One line per finding: ``file:line rule severity message``."""
    return "\n".join(f"{f.file}:{f.line} {f.rule} {f.severity} {f.message}" for f in findings)
