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

This module owns the policy (which operators are excluded and why), the dry run and its
cache, and :func:`build_trace_cases`. Reading the files is
:mod:`opbench.suites.trace_files`'s and the dataset table :mod:`opbench.suites.trace_dataset`'s;
their public names are re-exported here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from opbench.cache import cache_dir
from opbench.spec.args import ArgsParseError, ParsedArgs, TensorSpec, iter_tensor_specs, parse_args
from opbench.spec.ops import base_name, canonical_name, get_overload, overload_exists
from opbench.suites.case import Case
from opbench.suites.inputs import NotRunnable, make_inputs, resolve_op_name
from opbench.suites.trace_dataset import (
    DATASET_FIELDS,
    case_uuid,
    dataset_rows,
    dataset_summary,
    write_dataset,
)
from opbench.suites.trace_files import TraceEntry, TraceFormatError, load_trace_file, load_traces

__all__ = [
    "DATASET_FIELDS",
    "TraceEntry",
    "TraceFormatError",
    "build_trace_cases",
    "cache_dir",
    "case_uuid",
    "dataset_rows",
    "dataset_summary",
    "load_trace_file",
    "load_traces",
    "write_dataset",
]

log = logging.getLogger(__name__)


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


def _code_version() -> str:
    """Verdicts depend on this module and the input builder: changes invalidate the cache."""
    h = hashlib.sha256()
    from opbench.suites import input_call, input_index_rules, input_rules, inputs

    builder = (inputs, input_call, input_rules, input_index_rules)
    for mod_file in (__file__, *(m.__file__ for m in builder)):
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
        _call_on(overload, op, parsed, "meta", seed)
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
        _call_on(overload, op, parsed, "cpu", seed)
        return None
    except NotRunnable as e:
        return e.reason
    except Exception as e:
        return "dry run: " + _first_line(e)


def _call_on(overload: Any, op: str, parsed: ParsedArgs, device: str, seed: int) -> None:
    """One call of ``overload`` on inputs made on ``device``, warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args, kwargs = make_inputs(op, parsed, device, seed)
        with torch.no_grad():
            overload(*args, **kwargs)


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
    split: str | None = None,
) -> list[Case]:
    """Cases for every distinct (overload, arguments) pair in ``source``.

    ``split``: ``tuning`` or ``heldout`` keeps that half of the traces
    (:mod:`opbench.suites.trace_split`: held-out rows are those no tuning model uses).

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
    entries = load_traces(source)
    if split is not None:
        from opbench.suites.trace_split import select

        entries = select(entries, split)
    groups = _group(entries, wanted)
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
