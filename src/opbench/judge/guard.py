"""The guard's rules: which PyTorch calls a kernel may make, which outputs are real.

Runs in the HARNESS, on what the worker's observers recorded
(:mod:`opbench.instrument.observer`): the dispatch recorder on the calling thread, and
the process-wide execution observer, which also sees other threads, calls made with
the Python dispatch modes disabled, and the timed calls. :func:`classify_trial` merges
the two views of one trial; :func:`classify_timed` judges the calls seen while the
candidate was timed. Delegated compute is ``calls_pytorch``; an observer that was
switched off, or a process that changed under the call, is ``tampering``.

What is allowed (:data:`ALWAYS_ALLOWED`, :data:`COPY_OPS`), and why:

* the judged kernel itself, where the worker calls it through the C++ gate
  (``opbench_candidate::add.Tensor`` for ``add.Tensor``,
  :mod:`opbench.instrument.native_calls`): the gate launches the kernel in C++ and calls
  no other operator, and a test where a call reached the Python function through the gate
  is judged again on the function itself, where the observers see its calls;

* allocation and metadata (``empty*``, ``new_empty*``, ``resize_``, ``set_``,
  ``can_cast``/``result_type`` (type-promotion queries),
  ``_local_scalar_dense`` for ``.item()``, ``lift_fresh``, ``detach``, ``alias``,
  ``resolve_conj``/``resolve_neg`` that ``tensor.numpy()`` emits): they compute nothing;
* views (``view``, ``as_strided``, ``permute``, ``slice``, ...): they move no data;
* a ``copy_`` of memory onto itself (same address, dtype, shape and strides) moves
  nothing; Triton's interpreter makes one per tensor argument after every launch on CPU
  tensors, so data-movement kernels can be judged on the CPU too;
* copies and fills (``copy_``, ``clone``, ``_to_copy``, ``zero_``, ``fill_``, ``zeros``...):
  a kernel must be able to make its inputs contiguous, convert dtypes around a Triton
  launch, move data to the host for numpy, initialise an accumulator and write its result
  into ``out``/``self``. A copy or conversion is data movement, not the op's arithmetic.

Exception: when the judged op is itself a data-movement op (:data:`DATA_MOVEMENT_OPS`:
``clone``, ``cat``, ``fill_``, ``_to_copy``, ``constant_pad_nd``, ...), copies and fills
*are* its work, so they count as ``calls_pytorch`` -- except one ``copy_`` straight into
the ``self``/``out`` tensor the op must write, which is how opbench derives in-place and
``out=`` variants from a functional kernel. Everything else (``add``, ``mm``, ``sum``...)
is compute delegated to PyTorch.

The aten backend's kernel *is* the judged ``OpOverload``; it is PyTorch by definition,
so for the ``aten`` backend (:func:`is_reference_backend`) the worker skips the recorders (documented in
the verdict's details as ``guard: skipped``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from opbench.instrument.observer import NOOP_COPY, Call
from opbench.spec.reference import is_candidate_twin, is_reference_backend, is_reference_kernel

__all__ = [
    "ALWAYS_ALLOWED",
    "COPY_OPS",
    "DATA_MOVEMENT_OPS",
    "GuardResult",
    "classify_calls",
    "classify_trial",
    "classify_timed",
    "is_copy_like",
    "is_reference_backend",
    "is_reference_kernel",
    "output_problems",
    "output_problems_from_meta",
]

#: Ops that compute nothing: allocation, metadata, views, host transfer of scalars.
ALWAYS_ALLOWED: frozenset[str] = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided empty_permuted
    resize_ resize_as_ set_ lift_fresh detach detach_ alias resolve_conj resolve_neg
    _local_scalar_dense is_nonzero sym_size sym_stride sym_numel sym_storage_offset
    view _unsafe_view _reshape_alias as_strided as_strided_ expand permute transpose t
    unsqueeze squeeze slice select unbind split split_with_sizes chunk narrow unfold
    movedim diagonal view_as_real view_as_complex real imag _conj _neg_view
    _unsafe_split _unsafe_split_with_sizes record_stream _has_compatible_shallow_copy_type
    is_same_size is_pinned pin_memory _pin_memory can_cast result_type promote_types
    is_set_to size stride numel dim is_contiguous is_complex is_floating_point
    reshape reshape_as view_as expand_as flatten unflatten broadcast_to broadcast_tensors
    swapaxes swapdims moveaxis squeeze_ unsqueeze_ transpose_ t_ numpy_T mT mH matrix_H
    adjoint item requires_grad_ align_as lift
    """.split()
)

#: Data movement: allowed unless the judged op is itself one of :data:`DATA_MOVEMENT_OPS`.
COPY_OPS: frozenset[str] = frozenset(
    """
    copy_ copy clone _to_copy to contiguous lift_fresh_copy zero_ fill_ fill zeros zeros_like
    ones ones_like full full_like new_zeros new_ones new_full scalar_tensor _copy_from
    _copy_from_and_resize type_as
    """.split()
)

#: Ops whose whole job is moving or filling data: copies are their work.
DATA_MOVEMENT_OPS: frozenset[str] = frozenset(
    """
    copy copy_ clone _to_copy to contiguous lift_fresh_copy zero zero_ fill fill_ zeros
    zeros_like ones ones_like full full_like new_zeros new_ones new_full scalar_tensor
    cat stack hstack vstack dstack repeat tile expand_copy permute_copy transpose_copy
    view_copy t_copy slice_copy select_copy unsqueeze_copy squeeze_copy as_strided_copy
    alias_copy narrow_copy split_copy unbind_copy diagonal_copy unfold_copy
    constant_pad_nd pad slice_scatter select_scatter as_strided_scatter diagonal_scatter
    roll flip fliplr flipud rot90 _copy_from _copy_from_and_resize masked_fill index_copy
    repeat_interleave col2im im2col
    """.split()
)


def _base(name: str) -> str:
    """``aten::add_.Tensor`` / ``add_.Tensor`` -> ``add_``."""
    name = name.removeprefix("aten::").removeprefix("aten.")
    return name.split(".", 1)[0]


def _family(name: str) -> str:
    return _base(name).rstrip("_") or _base(name)


_DATA_MOVEMENT_FAMILIES = frozenset(_family(n) for n in DATA_MOVEMENT_OPS)


@dataclass
class GuardResult:
    """``violations``: delegated compute ops and counts; ``allowed``: plumbing seen."""

    violations: dict[str, int] = field(default_factory=dict)
    allowed: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def message(self) -> str:
        ops = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(self.violations.items()))
        return f"the kernel called PyTorch compute ops: {ops}"


def classify_calls(judged_op: str, calls: list[tuple[str, bool]] | list[Call]) -> GuardResult:
    """Split recorded calls of a kernel for ``judged_op`` into allowed and violations.

    ``calls`` are :class:`Call` objects or ``(name, into_target)`` pairs (as sent back
    by the worker). See the module docstring for the rule.
    """
    data_movement = _family(judged_op) in _DATA_MOVEMENT_FAMILIES
    bad: Counter[str] = Counter()
    ok: Counter[str] = Counter()
    target_copies = 0
    for c in calls:
        name, into = (c.name, c.into_target) if isinstance(c, Call) else (str(c[0]), bool(c[1]))
        base = _base(name)
        if base in ALWAYS_ALLOWED or name == NOOP_COPY or is_candidate_twin(name, judged_op):
            # the twin is the judged kernel itself, called through the C++ gate
            # (opbench.instrument.native_calls)
            ok[name] += 1
        elif base in COPY_OPS:
            if not data_movement:
                ok[name] += 1
            elif into and target_copies == 0:
                target_copies += 1
                ok[name] += 1
            else:
                bad[name] += 1
        else:
            bad[name] += 1
    return GuardResult(dict(bad), dict(ok))


def is_copy_like(op: str) -> bool:
    """Whether ``op``'s answer is, by definition, its input rearranged (views, copies,
    ``*_copy`` view variants, layout ops): "a copy of the input" is not a lazy answer."""
    base = _base(op)
    fam = base.rstrip("_") or base
    return (
        base in ALWAYS_ALLOWED
        or base in COPY_OPS
        or fam in _DATA_MOVEMENT_FAMILIES
        or base.endswith("_copy")
    )


def output_problems(obj: Any, path: str = "") -> list[str]:
    """Outputs that are not plain tensors with real storage (subclasses, meta/fake or
    sparse tensors, wrappers without data), as readable lines; empty when all are fine.
    (The same rule the judge applies to the worker's raw facts.)"""
    from opbench.instrument.tensors import output_meta

    return output_problems_from_meta(output_meta(obj, path))


# --------------------------------------------------------------------------- merged views


def _expanded(counts: dict[str, int] | None) -> list[tuple[str, bool]]:
    return [(str(n), False) for n, k in sorted((counts or {}).items()) for _ in range(int(k))]


def classify_trial(
    judged_op: str,
    calls: list[tuple[str, bool, int]],
    observed: dict[str, Any] | None,
) -> tuple[GuardResult, list[str]]:
    """Merge a trial's two records into one :class:`GuardResult`, plus tampering lines.

    ``calls``: the dispatch recorder's ``(name, into_target, count)``; ``observed``: the
    execution observer's :class:`~opbench.instrument.observer.ObservedCalls` as a dict.
    The observer sees composite ops before they decompose (``linear`` where the recorder
    sees ``t`` and ``addmm``), so the two are classified apart and a name counts as a
    violation as often as the view that saw it most often reports it. Copies into the
    write target are known only to the recorder; that many ``copy_`` calls the observer
    saw on the calling thread are taken to be the same ones.
    """
    rec = [(n, into) for n, into, k in calls for _ in range(int(k))]
    result = classify_calls(judged_op, rec)
    tamper: list[str] = []
    if not observed:
        return result, tamper
    if observed.get("corrupt"):
        tamper.append(str(observed["corrupt"]))
        return result, tamper
    if observed.get("error"):
        result.allowed.setdefault("(observer unavailable)", 1)
        return result, tamper
    expected, marks = int(observed.get("expected_marks") or 0), int(observed.get("marks") or 0)
    if expected and marks < expected:
        tamper.append(
            f"the process-wide call observer recorded {marks} of the {expected} kernel calls "
            "(it was switched off while the kernel ran)"
        )
    into_left = sum(1 for _, into in rec if into)
    noop_left = sum(1 for name, _ in rec if name == NOOP_COPY)
    scoped: list[tuple[str, bool]] = []
    for name, _ in _expanded(observed.get("scoped")):
        if _base(name) == "copy_" and noop_left > 0:
            noop_left -= 1  # the observer's view of a copy the recorder saw move nothing
            continue
        into = _base(name) in ("copy_", "_copy_from", "_copy_from_and_resize") and into_left > 0
        into_left -= into
        scoped.append((name, into))
    seen = classify_calls(judged_op, scoped)
    other = classify_calls(judged_op, _expanded(observed.get("other_threads")))
    merged = dict(result.violations)
    by_base = {_base(n): n for n in merged}  # "add.Tensor" (recorder) is "add" (observer)
    for name, k in seen.violations.items():
        key = by_base.get(_base(name), name)
        merged[key] = max(merged.get(key, 0), k)
    for name, k in other.violations.items():
        merged[f"{name} (on another thread)"] = k
    result.violations = merged
    for name, k in other.allowed.items():
        result.allowed[f"{name} (on another thread)"] = k
    return result, tamper


def classify_timed(judged_op: str, observed: dict[str, Any] | None) -> GuardResult:
    """Compute the candidate delegated to PyTorch while it was being timed.

    Copies and fills are not counted here (without the recorder, a copy into ``out``
    cannot be told from other copies), nor the judged kernel's own gated twin; everything
    else is, on any thread.
    """
    if not observed or observed.get("error"):
        return GuardResult()
    bad: Counter[str] = Counter()
    for where, counts in (
        ("", observed.get("scoped")),
        (" (on another thread)", observed.get("other_threads")),
    ):
        for name, k in (counts or {}).items():
            base = _base(name)
            if base in ALWAYS_ALLOWED or base in COPY_OPS or is_candidate_twin(name, judged_op):
                continue
            bad[f"{name}{where}"] += int(k)
    return GuardResult(dict(bad), {})


def output_problems_from_meta(meta: list[dict[str, Any]]) -> list[str]:
    """The judge's reading of the worker's raw output facts: outputs that are not
    plain tensors with real storage (subclasses, meta or sparse tensors, functorch
    wrappers, storage-less wrappers)."""
    problems: list[str] = []
    for m in meta:
        if m.get("kind") != "tensor":
            continue
        where = f"output{m.get('path', '')}" if m.get("path") else "output"
        if not m.get("plain", True):
            problems.append(f"{where} is a {m.get('type')}, not a plain torch.Tensor")
            continue
        if m.get("unreadable"):
            problems.append(f"{where}: {m['unreadable']}")
            continue
        if m.get("layout", "torch.strided") != "torch.strided":
            problems.append(f"{where} has layout {m.get('layout')}, not torch.strided")
        if m.get("device_type") == "meta":
            problems.append(f"{where} is a meta tensor (no data)")
        if m.get("functorch"):
            problems.append(f"{where} is a functorch wrapper")
        numel = 1
        for d in m.get("shape") or []:
            numel *= int(d)
        if numel > 0 and m.get("storage_ptr", 1) == 0 and m.get("device_type") != "meta":
            problems.append(f"{where} has no storage")
    return problems
