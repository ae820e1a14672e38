"""The check every kernel test uses: the judge's own comparison (``compare_outputs``),
the candidate against eager PyTorch and a float64 reference computed from upcast inputs,
so a kernel test fails exactly where ``opbench run`` would."""

from __future__ import annotations

import itertools
import os
import zlib
from collections.abc import Callable
from typing import Any

import torch

from opbench.judge.correctness import compare_outputs

#: Where the kernel tests' tensors live: the CPU (Triton's interpreter) unless
#: ``OPBENCH_KERNEL_DEVICE`` names a GPU (see conftest.py).
DEVICE = os.environ.get("OPBENCH_KERNEL_DEVICE", "cpu")


def _upcast(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16, torch.float32):
        return x.detach().to(torch.float64)
    if isinstance(x, (list, tuple)):
        return type(x)(_upcast(v) for v in x)
    return x


def _judged_as(reference: Callable[..., Any], args: tuple, kwargs: dict) -> dict[str, Any]:
    """What the judge passes ``compare_outputs`` besides the values (``trial_rules.
    compare_kwargs``): the op's name (``sum.dim_IntList``), so an accumulating op may pass
    by the norm test as in a run, and the largest input's size. Without them a row sum
    of 768 f32 values failed here 11 times in 40 seeds against CPU eager's cascade sum
    while ``opbench run`` passes it."""
    if not isinstance(reference, torch._ops.OpOverload):
        return {}
    sizes = [
        v.numel()
        for v in (*args, *kwargs.values())
        for v in (v if isinstance(v, (list, tuple)) else (v,))
        if isinstance(v, torch.Tensor)
    ]
    return {"op": str(reference).removeprefix("aten."), "max_in_numel": max(sizes, default=0)}


def assert_matches(got: Any, reference: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """``got`` must pass the judge's comparison with ``reference(*args, **kwargs)``."""
    eager = reference(*args, **kwargs)
    try:
        ref64 = reference(*_upcast(list(args)), **{k: _upcast(v) for k, v in kwargs.items()})
    except RuntimeError:  # the op rejects float64: eager is the reference
        ref64 = None
    if ref64 is not None:
        ref64 = _cast_structure(ref64, eager)
    result = compare_outputs(got, eager, ref64, **_judged_as(reference, args, kwargs))
    assert result.ok, f"{result.category}: {result.message}"


def on_device(x: torch.Tensor) -> torch.Tensor:
    """``x`` on ``DEVICE`` with its strides and storage offset (``.to`` would make a
    sliced view contiguous)."""
    if DEVICE == "cpu":
        return x
    storage = x.as_strided((x.untyped_storage().nbytes() // x.element_size(),), (1,), 0)
    return storage.to(DEVICE).as_strided(x.shape, x.stride(), x.storage_offset())


def stable_seed(*parts: object) -> int:
    """A seed from ``parts`` that is the same in every process (``hash()`` of a string is
    salted per process, so a failing input could not be drawn again)."""
    return zlib.crc32(repr(parts).encode()) % 2**31


def sample_input(layout: str, dtype: torch.dtype) -> torch.Tensor:
    """A seeded 3-D input of the named layout (values ~N(0, 9)) on ``DEVICE``:
    ``contiguous``, ``transposed`` (permuted, no dim mergeable), ``sliced`` (steps in two
    dims), ``4d`` (a 4-D permutation whose outer and inner pairs do not merge). Drawn on
    the CPU, so the values are the same on every device."""
    g = torch.Generator().manual_seed(stable_seed(layout, str(dtype)))

    def r(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 3).to(dtype)

    if layout == "contiguous":
        x = r(6, 19, 5)
    elif layout == "transposed":
        x = r(5, 19, 6).permute(2, 1, 0)
    elif layout == "sliced":
        x = r(6, 38, 10)[:, ::2, 1::2]
    elif layout == "4d":
        x = r(3, 4, 5, 6).permute(0, 2, 1, 3)
    else:
        raise AssertionError(layout)
    return on_device(x)


def _cast_structure(ref: Any, eager: Any) -> Any:
    if isinstance(ref, torch.Tensor) and isinstance(eager, torch.Tensor):
        return ref if eager.dtype.is_floating_point else ref.to(eager.dtype)
    if isinstance(ref, (list, tuple)):
        return type(ref)(_cast_structure(r, e) for r, e in zip(ref, eager))
    return ref


def meta(t: torch.Tensor | None) -> tuple | None:
    """(shape, dtype, strides) of an output, None for an absent one: what must match
    eager beside the values."""
    return None if t is None else (tuple(t.shape), t.dtype, t.stride())


def assert_batch_norm_backward_matches(ours: Callable[..., Any], *args: Any) -> None:
    """``ours(*args)`` against eager's native_batch_norm_backward, values and metadata, as
    far as eager has an answer on this device. CUDA eager (torch 2.11 on the H100) raises
    "tensor does not have a device" for some output masks when the weight is None:
    nothing to match there; and with no weight its parameter gradients are empty, or
    returned though not asked for (``batch_norm_backward._empty_param_grads``), so
    grad_input alone is matched there."""
    aten = torch.ops.aten
    try:
        want = aten.native_batch_norm_backward(*args)
    except RuntimeError as e:
        if DEVICE != "cpu" and "does not have a device" in str(e):
            return
        raise
    got = ours(*args)
    if args[2] is None and DEVICE != "cpu":
        got, want = got[:1], want[:1]
        assert_matches(got[0], lambda *a: aten.native_batch_norm_backward(*a)[0], *args)
    else:
        assert_matches(got, aten.native_batch_norm_backward, *args)
    assert [meta(t) for t in got] == [meta(t) for t in want]


def assert_batch_norm_both_ways(forward: Callable[..., Any], backward: Callable[..., Any],
                                x: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                                rm: torch.Tensor, rv: torch.Tensor, g: torch.Tensor) -> None:  # fmt: skip
    """``forward`` (a native_batch_norm) training and eval against eager, with the output
    metadata and the running statistics it updates in place, then ``backward`` (a
    native_batch_norm_backward, ``g`` the output's gradient) under every output mask."""
    aten = torch.ops.aten
    for training in (True, False):
        ours_rm, ours_rv = rm.clone(), rv.clone()
        got = forward(x, w, b, ours_rm, ours_rv, training, 0.1, 1e-5)
        eager_rm, eager_rv = rm.clone(), rv.clone()
        want = aten.native_batch_norm(x, w, b, eager_rm, eager_rv, training, 0.1, 1e-5)
        assert [meta(t) for t in got] == [meta(t) for t in want]
        assert_matches(got, aten.native_batch_norm, x, w, b, rm.clone(), rv.clone(), training,
                       0.1, 1e-5)  # fmt: skip
        torch.testing.assert_close(ours_rm, eager_rm)
        torch.testing.assert_close(ours_rv, eager_rv)
        # the batch's statistics, unlike the running ones, in eval mode too: which of the
        # two eager reads differs by device and path (batch_norm_backward._reads_running)
        _, sm, si = aten.native_batch_norm(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
        for mask in itertools.product([True, False], repeat=3):
            args = (g, x, w, rm, rv, sm, si, training, 1e-5, list(mask))
            assert_matches(backward(*args), aten.native_batch_norm_backward, *args)


def seeded_randn(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Normal values of ``shape`` drawn on the CPU from ``seed`` (the same on every
    device), then moved to the tests' device in ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(DEVICE, dtype)


def launch_grids(monkeypatch: Any, module: Any, name: str) -> list[tuple[int, ...]]:
    """The grids of ``module.name``'s launches from now on (a launcher takes its grid
    first), the launches themselves run unchanged."""
    grids: list[tuple[int, ...]] = []
    launch = getattr(module, name)

    def counted(grid, *a, **k):
        grids.append(tuple(grid))
        return launch(grid, *a, **k)

    monkeypatch.setattr(module, name, counted)
    return grids


def launch_constants(monkeypatch: Any, launchers: Any, name: str) -> list[Any]:
    """The constexpr ``name`` of every launch of the ``(module, attribute)`` launchers in
    ``launchers`` from now on, the launches themselves run unchanged."""
    seen: list[Any] = []
    for module, attr in launchers:
        launch = getattr(module, attr)

        def recorded(grid, *a, _launch=launch, **k):
            seen.append(k[name])
            return _launch(grid, *a, **k)

        monkeypatch.setattr(module, attr, recorded)
    return seen
