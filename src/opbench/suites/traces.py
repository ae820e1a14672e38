"""The traces suite: real models' operator calls, as test cases.

Trace files (TritonBench ``input_configs`` format) list, under ``Operator: aten.X.Y``
lines, ``cnt: N, ((args...), {kwargs})`` lines: an argument set and how often a model
called it. This module loads a folder of them (or one file, or BackendBench's published
parquet), de-duplicates identical (operator, arguments) pairs across models while
keeping the total count and the set of models, and decides for every pair whether it is
runnable and included, with a reason when it is not.

Runnability is decided without running anything for real: inputs are built on the
``meta`` device (same shapes, strides and dtypes, no data) and the operator is called on
them, which checks shapes and arguments in ~0.5 ms a case. Device-specific limits that
the meta device cannot see (cuDNN RNNs, complex32 and mixed-precision norm backward on
CPU) are rules below. Verdicts are cached on disk, keyed by torch version, device and
the code of this module and the input builder, so a second build takes seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from opbench.spec.args import ArgsParseError, ParsedArgs, TensorSpec, iter_tensor_specs, parse_args
from opbench.spec.ops import base_name, canonical_name, get_overload, overload_exists
from opbench.suites.case import Case
from opbench.suites.inputs import NotRunnable, make_inputs, resolve_op_name

__all__ = [
    "DATASET_FIELDS",
    "TraceEntry",
    "TraceFormatError",
    "build_trace_cases",
    "cache_dir",
    "dataset_rows",
    "dataset_summary",
    "load_trace_file",
    "load_traces",
    "write_dataset",
]

log = logging.getLogger(__name__)

#: Columns of the dataset table, in order (the published TorchBench suite's fields).
DATASET_FIELDS: tuple[str, ...] = (
    "uuid",
    "op_name",
    "args",
    "runnable",
    "included_in_benchmark",
    "why_excluded",
    "is_synthetic",
    "runtime_ms",
    "relative_runtime_to_kernel_launch",
    "is_overhead_dominated_op",
    "count",
    "in_models",
    "in_models_count",
)


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


# --------------------------------------------------------------------------- policy

#: Operators whose result depends on the random number generator: no reference value.
RANDOM_OPS = frozenset(
    {
        "bernoulli",
        "dropout",
        "native_dropout",
        "feature_dropout",
        "alpha_dropout",
        "feature_alpha_dropout",
        "_fused_dropout",
        "rand",
        "rand_like",
        "randn",
        "randn_like",
        "randint",
        "randint_like",
        "randperm",
        "normal",
        "uniform",
        "exponential",
        "geometric",
        "log_normal",
        "cauchy",
        "random",
        "multinomial",
        "poisson",
        "binomial",
        "_standard_gamma",
        "_sample_dirichlet",
        "rrelu",
        "rrelu_with_noise",
    }
)

#: Allocation/factory operators: the output depends on no input values (at most on
#: shape, dtype and device), so a test could only check metadata, and for ``empty*``
#: the values are undefined. Excluded; ``fill_``/``copy_``/``lift_fresh_copy`` stay.
CREATION_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "ones",
        "ones_like",
        "new_ones",
        "full",
        "full_like",
        "new_full",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "scalar_tensor",
        "_sparse_coo_tensor_with_dims_and_tensors",
        "sparse_coo_tensor",
        "_sparse_coo_tensor_unsafe",
    }
)

_NORM_OPS = frozenset(
    {
        "native_layer_norm",
        "native_layer_norm_backward",
        "native_batch_norm",
        "native_batch_norm_backward",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "native_group_norm",
        "native_group_norm_backward",
    }
)


def _family(op: str) -> str:
    base = base_name(op)
    if base.endswith("_") and not base.startswith("_"):
        base = base[:-1]
    return base


def _float_dtypes(parsed: ParsedArgs) -> set[torch.dtype]:
    return {s.dtype for s in iter_tensor_specs(parsed) if s.dtype.is_floating_point}


def device_limit(op: str, parsed: ParsedArgs, device: str) -> str | None:
    """Why this case cannot run on ``device`` though its shapes are valid (None: it can).

    These are limits of PyTorch's kernels that a meta-device dry run cannot see.
    """
    fam = _family(op)
    on_cuda = device == "cuda"
    if fam.startswith(("_cudnn", "cudnn_", "miopen")):
        return None if on_cuda else "cuda only: cuDNN kernel"
    has_chalf = any(s.dtype == torch.complex32 for s in iter_tensor_specs(parsed))
    if has_chalf and not on_cuda:
        return "cuda only: complex32 (chalf) kernels exist only on CUDA"
    if fam in _NORM_OPS and len(_float_dtypes(parsed)) > 1 and not on_cuda:
        return "cuda only: mixed-precision norm (f16/bf16 data with f32 statistics)"
    if (
        fam.startswith("grid_sampler")
        and not on_cuda
        and _float_dtypes(parsed) & {torch.float16, torch.bfloat16}
    ):
        # Measured with torch 2.13 on CPU: the same float16 inputs give 2,700 to 17,000
        # NaN (of 2.2M outputs, none in float64) that move between calls, and a harness
        # computing it once died with SIGSEGV: the kernel reads memory it does not own.
        return "cuda only: PyTorch's CPU half-precision grid_sampler is unreliable"
    if on_cuda and fam.startswith("_fft") and has_chalf:
        dims = parsed.args[1] if len(parsed.args) > 1 else []
        x = parsed.args[0]
        if isinstance(x, TensorSpec) and isinstance(dims, (list, tuple)):
            sizes = [
                x.shape[d] for d in dims if isinstance(d, int) and -len(x.shape) <= d < len(x.shape)
            ]
            if any(n & (n - 1) for n in sizes):
                return "cuFFT in half precision needs power-of-two signal sizes"
    return None


def static_exclusion(op: str, device: str) -> tuple[str | None, bool]:
    """(reason, runnable) decided from the operator alone: missing, random or creation."""
    if not overload_exists(op):
        return f"overload aten.{op} does not exist in torch {torch.__version__}", False
    fam = _family(op)
    if fam in RANDOM_OPS:
        return "random: the output depends on the random number generator", True
    if fam in CREATION_OPS:
        return "tensor creation: the output depends on no input values", True
    return None, True


# --------------------------------------------------------------------------- dry run + cache


def cache_dir() -> Path:
    """``OPBENCH_CACHE_DIR`` or ``~/.cache/opbench``."""
    env = os.environ.get("OPBENCH_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "opbench"


def _code_version() -> str:
    """Verdicts depend on this module and the input builder: changes invalidate the cache."""
    h = hashlib.sha256()
    from opbench.suites import inputs

    for mod_file in (__file__, inputs.__file__):
        try:
            h.update(Path(mod_file).read_bytes())
        except OSError:  # pragma: no cover - frozen installs
            h.update(mod_file.encode())
    return h.hexdigest()[:12]


class _VerdictCache:
    """Dry-run verdicts in one JSON file per (torch version, device, code version)."""

    def __init__(self, device: str, enabled: bool = True) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", torch.__version__)
        self.path = cache_dir() / f"dryrun-{safe}-{device}-{_code_version()}.json"
        self.enabled = enabled
        self.data: dict[str, str] = {}
        self.dirty = False
        if enabled and self.path.exists():
            try:
                self.data = json.loads(self.path.read_text())
            except (OSError, json.JSONDecodeError):
                log.warning("ignoring unreadable cache %s", self.path)

    @staticmethod
    def key(op: str, args: str) -> str:
        return hashlib.sha256(f"{op}\0{args}".encode()).hexdigest()[:24]

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def put(self, key: str, verdict: str) -> None:
        self.data[key] = verdict
        self.dirty = True

    def save(self) -> None:
        if not (self.enabled and self.dirty):
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(self.data, f)
            os.replace(tmp, self.path)
        except OSError as e:
            log.warning("could not write the dry-run cache %s: %s", self.path, e)


_OK = ""  # cache value for "runs"; anything else is the reason it does not
_SMALL_ENOUGH = 1 << 22  # elements: data-dependent ops this small are checked for real on CPU


def dry_run(op: str, parsed: ParsedArgs, seed: int = 0) -> str | None:
    """Why this call fails (None when it works), decided on the meta device.

    Operators whose output shape depends on values (``nonzero``, boolean indexing)
    cannot run on meta; those are run for real on the CPU when their inputs are small.
    """
    try:
        overload = get_overload(op)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            args, kwargs = make_inputs(op, parsed, "meta", seed)
            with torch.no_grad():
                overload(*args, **kwargs)
        return None
    except NotRunnable as e:
        return e.reason
    except NotImplementedError as e:
        if "data-dependent" not in str(e) and "data-independent" not in str(e):
            return "dry run: " + _first_line(e)
    except Exception as e:  # the op's own argument checks: any exception type
        return "dry run: " + _first_line(e)
    # data-dependent output shape: check for real when small
    numel = sum(s.numel for s in iter_tensor_specs(parsed))
    if numel > _SMALL_ENOUGH:
        return "dry run: data-dependent output shape and inputs too large to check"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            args, kwargs = make_inputs(op, parsed, "cpu", seed)
            with torch.no_grad():
                overload(*args, **kwargs)
        return None
    except NotRunnable as e:
        return e.reason
    except Exception as e:
        return "dry run: " + _first_line(e)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".strip()


# --------------------------------------------------------------------------- building


@dataclass
class _Group:
    op: str
    args: str
    count: int
    models: set[str]
    file: str
    line: int
    trace_ops: set[str]


def _group(entries: Iterable[TraceEntry], ops: set[str] | None) -> list[_Group]:
    groups: dict[tuple[str, str], _Group] = {}
    for e in entries:
        op = resolve_op_name(e.op)
        if ops is not None and op not in ops and e.op not in ops:
            continue
        args = e.args.strip()
        g = groups.get((op, args))
        if g is None:
            groups[(op, args)] = _Group(
                op, args, e.count, set(e.all_models), e.file, e.line, {e.op}
            )
        else:
            g.count += e.count
            g.models.update(e.all_models)
            g.trace_ops.add(e.op)
    return list(groups.values())


def _norm_device(device: str | torch.device) -> str:
    return torch.device(device).type


def build_trace_cases(
    source: str | Path,
    *,
    suite: str = "traces",
    seed: int = 0,
    ops: set[str] | None = None,
    device: str = "cpu",
    use_cache: bool = True,
) -> list[Case]:
    """Cases for every distinct (overload, arguments) pair in ``source``.

    ``ops`` keeps only those overloads (names without ``aten.``, as
    :func:`opbench.spec.ops.select_ops` returns them). ``device`` is the device the run
    targets: cases that only run on CUDA are included when it is ``cuda``. Every case
    says whether it is ``included`` and, if not, ``why_excluded``; ``params["runnable"]``
    says whether it could run at all. Order: by op, then count (descending), then args,
    so ``--limit-per-op N`` takes the N most-used argument sets.

    Raises :class:`TraceFormatError` for malformed files (naming file and line).
    """
    dev = _norm_device(device)
    wanted = (
        None
        if ops is None
        else {resolve_op_name(o) for o in ops} | {canonical_name(o) for o in ops}
    )
    groups = _group(load_traces(source), wanted)
    cache = _VerdictCache(dev, enabled=use_cache)
    cases = []
    todo = 0
    for g in groups:
        key = cache.key(g.op, g.args)
        verdict = cache.get(key)
        reason: str | None
        runnable = True
        static_reason, static_runnable = static_exclusion(g.op, dev)
        if verdict is None:
            todo += 1
            try:
                parsed = parse_args(g.args)
            except ArgsParseError as e:
                raise TraceFormatError.from_args_error(e, g.file, g.line) from None
            limit = None if static_reason else device_limit(g.op, parsed, dev)
            if static_reason or limit:
                verdict = "-"  # parsed; decided by rules, no dry run needed
            else:
                verdict = dry_run(g.op, parsed, seed) or _OK
            if limit:
                verdict = "!" + limit
            cache.put(key, verdict)
        if g.count == 0:
            reason = "synthetic input (cnt: 0)"
        else:
            reason = static_reason
        runnable = static_runnable
        if verdict.startswith("!"):
            reason = reason or verdict[1:]
            runnable = False
        elif verdict not in (_OK, "-"):
            reason = reason or verdict
            runnable = False
        params: dict[str, Any] = {"runnable": runnable}
        extra_names = sorted(g.trace_ops - {g.op})
        if extra_names:
            params["trace_ops"] = extra_names
        cases.append(
            Case(
                op=g.op,
                args=g.args,
                seed=seed,
                suite=suite,
                source="args",
                params=params,
                count=g.count,
                models=tuple(sorted(g.models)),
                included=reason is None,
                why_excluded=reason,
                is_synthetic=g.count == 0,
            )
        )
    if todo:
        log.info("dry-ran %d new (op, args) pairs; %d from the cache", todo, len(groups) - todo)
    cache.save()
    cases.sort(key=lambda c: (c.op, -c.count, c.args))
    return cases


# --------------------------------------------------------------------------- dataset table


def case_uuid(op: str, args: str) -> str:
    """Stable id of an (op, args) pair: sha256 of args + ``aten.`` op (BackendBench's recipe)."""
    return hashlib.sha256(args.encode() + f"aten.{op}".encode()).hexdigest()


def dataset_rows(cases: Iterable[Case]) -> list[dict[str, Any]]:
    """One row per case with exactly :data:`DATASET_FIELDS` (runtime fields null)."""
    rows = []
    for c in cases:
        rows.append(
            {
                "uuid": case_uuid(c.op, c.args),
                "op_name": f"aten.{c.op}",
                "args": c.args,
                "runnable": bool(c.params.get("runnable", c.included)),
                "included_in_benchmark": bool(c.included),
                "why_excluded": [] if c.why_excluded is None else [c.why_excluded],
                "is_synthetic": bool(c.is_synthetic),
                "runtime_ms": None,
                "relative_runtime_to_kernel_launch": None,
                "is_overhead_dominated_op": None,
                "count": int(c.count),
                "in_models": list(c.models),
                "in_models_count": len(c.models),
            }
        )
    return rows


def write_dataset(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write rows as ``.parquet`` (needs pyarrow) or ``.json``; the file is replaced atomically."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".json"):
        raise ValueError(f"output must end in .parquet or .json, not {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=suffix + ".tmp")
    os.close(fd)
    try:
        if suffix == ".json":
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(rows, f, indent=1)
                f.write("\n")
        else:
            _write_parquet(rows, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _write_parquet(rows: list[dict[str, Any]], path: str) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("writing parquet needs pyarrow: pip install 'opbench[parquet]'") from None
    schema = pa.schema(
        [
            ("uuid", pa.string()),
            ("op_name", pa.string()),
            ("args", pa.string()),
            ("runnable", pa.bool_()),
            ("included_in_benchmark", pa.bool_()),
            ("why_excluded", pa.list_(pa.string())),
            ("is_synthetic", pa.bool_()),
            ("runtime_ms", pa.float64()),
            ("relative_runtime_to_kernel_launch", pa.float64()),
            ("is_overhead_dominated_op", pa.bool_()),
            ("count", pa.int64()),
            ("in_models", pa.list_(pa.string())),
            ("in_models_count", pa.int64()),
        ]
    )
    assert tuple(schema.names) == DATASET_FIELDS
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def dataset_summary(cases: list[Case]) -> dict[str, Any]:
    """Counts for the summary table: ops, rows, included, and exclusion reasons."""
    reasons: Counter[str] = Counter()
    for c in cases:
        if not c.included and c.why_excluded:
            reasons[_reason_class(c.why_excluded)] += 1
    return {
        "ops": len({c.op for c in cases}),
        "ops_included": len({c.op for c in cases if c.included}),
        "rows": len(cases),
        "included": sum(c.included for c in cases),
        "runnable": sum(bool(c.params.get("runnable", c.included)) for c in cases),
        "reasons": reasons.most_common(),
    }


def _reason_class(reason: str) -> str:
    """Group reasons that embed details (shapes, names) under their stable prefix."""
    if reason.startswith("dry run:"):
        return reason[:80]
    if reason.startswith("overload "):
        return "overload does not exist in this torch"
    return reason
