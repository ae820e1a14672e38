"""The guard: notice kernels that hand their work to PyTorch, and outputs that are not
plain tensors.

:class:`DispatchRecorder` is a ``TorchDispatchMode`` entered *inside* the worker's
call of a kernel (a mode entered around a ``torch.library`` override would not see
what the kernel calls, see FACTS.md). It records every ATen op the kernel runs.
:func:`classify_calls` then splits them into allowed plumbing and delegated compute.

What is allowed (:data:`ALWAYS_ALLOWED`, :data:`COPY_OPS`), and why:

* allocation and metadata (``empty*``, ``new_empty*``, ``resize_``, ``set_``,
  ``can_cast``/``result_type`` (type-promotion queries),
  ``_local_scalar_dense`` for ``.item()``, ``lift_fresh``, ``detach``, ``alias``,
  ``resolve_conj``/``resolve_neg`` that ``tensor.numpy()`` emits): they compute nothing;
* views (``view``, ``as_strided``, ``permute``, ``slice``, ...): they move no data;
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
so :func:`is_reference_kernel` lets the worker skip the recorder for it (documented in
the verdict's details as ``guard: skipped``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "ALWAYS_ALLOWED",
    "COPY_OPS",
    "DATA_MOVEMENT_OPS",
    "DispatchRecorder",
    "GuardResult",
    "classify_calls",
    "is_copy_like",
    "is_reference_kernel",
    "output_problems",
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
    """.split()
)

#: Data movement: allowed unless the judged op is itself one of :data:`DATA_MOVEMENT_OPS`.
COPY_OPS: frozenset[str] = frozenset(
    """
    copy_ copy clone _to_copy to contiguous lift_fresh_copy zero_ fill_ fill zeros zeros_like
    ones ones_like full full_like new_zeros new_ones new_full scalar_tensor _copy_from
    _copy_from_and_resize
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


@dataclass
class Call:
    """One recorded ATen call: its name and whether it was a copy into a write target."""

    name: str
    into_target: bool = False


class DispatchRecorder(TorchDispatchMode):
    """Records every ATen op run while active; ``targets`` are the ``self``/``out``
    tensors of the call (a ``copy_`` into one of them is marked ``into_target``)."""

    def __init__(self, targets: list[torch.Tensor] | None = None) -> None:
        super().__init__()
        self.calls: list[Call] = []
        self._targets = {id(t) for t in targets or []}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        name = func.name() if hasattr(func, "name") else str(func)
        into = False
        if _base(name) in ("copy_", "_copy_from", "_copy_from_and_resize") and args:
            dst = args[0] if _base(name) == "copy_" else (args[1] if len(args) > 1 else None)
            into = id(dst) in self._targets
        self.calls.append(Call(str(name).removeprefix("aten::"), into))
        return func(*args, **kwargs)


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
    data_movement = _family(judged_op) in {_family(n) for n in DATA_MOVEMENT_OPS}
    bad: Counter[str] = Counter()
    ok: Counter[str] = Counter()
    target_copies = 0
    for c in calls:
        name, into = (c.name, c.into_target) if isinstance(c, Call) else (str(c[0]), bool(c[1]))
        base = _base(name)
        if base in ALWAYS_ALLOWED:
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
        or fam in {_family(n) for n in DATA_MOVEMENT_OPS}
        or base.endswith("_copy")
    )


def is_reference_kernel(kernel: Any, overload: Any) -> bool:
    """True when the kernel is the judged ``OpOverload`` itself (the aten backend)."""
    return isinstance(kernel, torch._ops.OpOverload) and kernel == overload


def output_problems(obj: Any, path: str = "") -> list[str]:
    """Outputs that are not plain tensors with real storage (subclasses, meta/fake or
    sparse tensors, wrappers without data), as readable lines; empty when all are fine."""
    if isinstance(obj, (tuple, list)):
        out: list[str] = []
        for i, v in enumerate(obj):
            out.extend(output_problems(v, f"{path}[{i}]"))
        return out
    where = f"output{path}" if path else "output"
    if not isinstance(obj, torch.Tensor):
        return []
    problems = []
    if type(obj) is not torch.Tensor:
        problems.append(
            f"{where} is a {type(obj).__module__}.{type(obj).__qualname__}, not a plain torch.Tensor"
        )
        return problems
    if obj.layout != torch.strided:
        problems.append(f"{where} has layout {obj.layout}, not torch.strided")
    if obj.device.type == "meta":
        problems.append(f"{where} is a meta tensor (no data)")
    try:
        if obj.numel() > 0 and obj.untyped_storage().data_ptr() == 0:
            problems.append(f"{where} has no storage")
    except (RuntimeError, NotImplementedError) as e:
        problems.append(f"{where} has no real storage ({type(e).__name__}: {e})")
    try:
        if torch._C._functorch.is_functorch_wrapped_tensor(obj):  # type: ignore[attr-defined]
            problems.append(f"{where} is a functorch wrapper")
    except (AttributeError, RuntimeError):
        pass
    return problems
