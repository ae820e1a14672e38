"""Reading trace files: the TritonBench ``input_configs`` text format and its table forms.

Owns :class:`TraceEntry` (one ``cnt:`` line or one table row), :class:`TraceFormatError`
(naming the file and line) and the loaders: :func:`load_trace_file` (one ``.txt`` file)
and :func:`load_traces` (a folder of them, one file, or BackendBench's parquet / opbench's
JSON table). Structure only: the arguments are parsed, de-duplicated and judged runnable
by :func:`opbench.suites.traces.build_trace_cases`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opbench.spec.args import ArgsParseError
from opbench.spec.ops import canonical_name

__all__ = ["TraceEntry", "TraceFormatError", "load_trace_file", "load_traces"]


class TraceFormatError(ValueError):
    """A malformed trace file, naming the file and the (1-based) line."""

    def __init__(self, message: str, *, file: str | Path, line: int | None) -> None:
        self.file = str(file)
        self.line = line
        self.message = message
        where = f"{self.file}, line {line}" if line is not None else self.file
        super().__init__(f"{where}: {message}")

    @classmethod
    def from_args_error(cls, err: ArgsParseError, file: str | Path, line: int) -> TraceFormatError:
        located = err.located(str(file), line)
        out = cls(located.message, file=file, line=line)
        out.args = (str(located),)
        return out


@dataclass
class TraceEntry:
    """One ``cnt:`` line (or one parquet row): an overload, its arguments and a count.

    ``model`` is the trace file's stem; ``models`` lists every model a parquet row
    stands for (empty for trace files, where it is just ``model``).
    """

    op: str
    args: str
    count: int
    model: str
    file: str
    line: int
    models: tuple[str, ...] = ()

    @property
    def all_models(self) -> tuple[str, ...]:
        return self.models or (self.model,)


# --------------------------------------------------------------------------- loading

_CNT = re.compile(r"cnt:\s*(\d+)\s*,\s*(.*\S)\s*$")


def load_trace_file(path: str | Path) -> list[TraceEntry]:
    """The entries of one trace ``.txt`` file (model = file stem).

    Checks the structure (``Operator:`` before ``cnt:``, counts are integers); the
    arguments themselves are parsed by :func:`build_trace_cases` (or
    :func:`check_entries`), which reports a bad one with this file and line.
    """
    path = Path(path)
    entries: list[TraceEntry] = []
    op: str | None = None
    model = path.stem
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(f"not UTF-8 text ({e})", file=path, line=None) from None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("Operator:"):
            name = line[len("Operator:") :].strip()
            if not name or " " in name:
                raise TraceFormatError(f"bad operator name {name!r}", file=path, line=lineno)
            op = canonical_name(name)
            continue
        if line.startswith("cnt:"):
            m = _CNT.match(line)
            if m is None:
                raise TraceFormatError(
                    "expected 'cnt: N, ((args...), {kwargs})'", file=path, line=lineno
                )
            if op is None:
                raise TraceFormatError(
                    "'cnt:' line before any 'Operator:' line", file=path, line=lineno
                )
            entries.append(TraceEntry(op, m.group(2), int(m.group(1)), model, str(path), lineno))
            continue
        raise TraceFormatError(f"unexpected line {line[:60]!r}", file=path, line=lineno)
    return entries


def load_traces(source: str | Path) -> list[TraceEntry]:
    """Entries from a folder (every ``*.txt`` below it), one ``.txt`` file, or a parquet/JSON table.

    The table form is BackendBench's ``backend_bench_problems`` (columns ``op_name``,
    ``args``, ``count``, ``in_models``) or opbench's own ``opbench dataset`` output.
    """
    source = Path(source)
    if source.is_dir():
        files = sorted(p for p in source.rglob("*.txt") if p.is_file())
        if not files:
            raise FileNotFoundError(f"no *.txt trace files under {source}")
        out: list[TraceEntry] = []
        for f in files:
            out.extend(load_trace_file(f))
        return out
    if not source.exists():
        raise FileNotFoundError(f"trace source {source} does not exist")
    suffix = source.suffix.lower()
    if suffix == ".parquet":
        return _load_table(_read_parquet(source), source)
    if suffix == ".json":
        try:
            rows = json.loads(source.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise TraceFormatError(f"bad JSON: {e.msg}", file=source, line=e.lineno) from None
        if isinstance(rows, dict) and "rows" in rows:
            rows = rows["rows"]
        if not isinstance(rows, list):
            raise TraceFormatError("expected a list of rows", file=source, line=None)
        return _load_table(rows, source)
    return load_trace_file(source)


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError(
            "reading parquet traces needs pyarrow: pip install 'opbench[parquet]'"
        ) from None
    return pq.read_table(path).to_pylist()


def _split_models(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value if str(v))
    if hasattr(value, "tolist"):
        return _split_models(value.tolist())
    return tuple(m for m in re.split(r"[,;\s]+", str(value)) if m)


def _load_table(rows: list[dict[str, Any]], source: Path) -> list[TraceEntry]:
    out = []
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or "op_name" not in row or "args" not in row:
            raise TraceFormatError("row lacks op_name/args", file=source, line=i)
        count = row.get("count", 1)
        try:
            count = int(count) if count is not None else 1
        except (TypeError, ValueError):
            raise TraceFormatError(f"bad count {count!r}", file=source, line=i) from None
        models = _split_models(row.get("in_models"))
        model = models[0] if models else source.stem
        out.append(
            TraceEntry(
                canonical_name(str(row["op_name"])),
                str(row["args"]),
                count,
                model,
                str(source),
                i,
                models,
            )
        )
    return out
