"""The check every kernel test uses: the judge's own comparison (``compare_outputs``),
the candidate against eager PyTorch and a float64 reference computed from upcast inputs,
so a kernel test fails exactly where ``opbench run`` would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from opbench.judge.correctness import compare_outputs


def _upcast(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16, torch.float32):
        return x.detach().to(torch.float64)
    if isinstance(x, (list, tuple)):
        return type(x)(_upcast(v) for v in x)
    return x


def assert_matches(got: Any, reference: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """``got`` must pass the judge's comparison with ``reference(*args, **kwargs)``."""
    eager = reference(*args, **kwargs)
    try:
        ref64 = reference(*_upcast(list(args)), **{k: _upcast(v) for k, v in kwargs.items()})
    except RuntimeError:  # the op rejects float64: eager is the reference
        ref64 = None
    if ref64 is not None:
        ref64 = _cast_structure(ref64, eager)
    result = compare_outputs(got, eager, ref64)
    assert result.ok, f"{result.category}: {result.message}"


def _cast_structure(ref: Any, eager: Any) -> Any:
    if isinstance(ref, torch.Tensor) and isinstance(eager, torch.Tensor):
        return ref if eager.dtype.is_floating_point else ref.to(eager.dtype)
    if isinstance(ref, (list, tuple)):
        return type(ref)(_cast_structure(r, e) for r, e in zip(ref, eager))
    return ref
