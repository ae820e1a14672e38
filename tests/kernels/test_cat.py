"""``cat``'s one-launch kernel (up to four inputs a launch, each with its own merged
shape and strides) against ``torch.cat``, on the layouts the traced models pass:
transposed and sliced views, channels-last, more inputs than one launch takes, empty
inputs, mixed dtypes and ``out=``. A copy is exact, so results must be equal."""

from __future__ import annotations

import pytest
import torch
from kernel_checks import DEVICE

from opbench.kernels._lib import copy as kcopy


def _rand(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 10).to(DEVICE, dtype)


def _check(parts: list[torch.Tensor], dim: int) -> None:
    got = kcopy.cat(parts, dim)
    want = torch.cat(parts, dim)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.stride() == want.stride()
    assert torch.equal(got, want)


def test_transposed_views_like_attention_heads() -> None:
    # [1, 12, 64, 64] views of a [1, 64, 768] projection, and a contiguous past
    base = [_rand((1, 64, 768), torch.float16, i) for i in range(4)]
    views = [b.view(1, 64, 12, 64).transpose(1, 2) for b in base]
    past = _rand((1, 12, 32, 64), torch.float16, 9)
    _check([*views, past], 2)


def test_more_inputs_than_one_launch_and_uneven_sizes() -> None:
    parts = [_rand((3, k, 5), torch.float32, k) for k in (1, 7, 2, 9, 4, 3)]
    _check(parts, 1)
    _check([p.transpose(0, 2) for p in parts], 1)


def test_outer_dims_that_do_not_merge() -> None:
    a = _rand((4, 6, 8), torch.float32, 1)
    b = _rand((4, 8, 6), torch.float32, 2).transpose(1, 2)  # strides (48, 1, 6)
    _check([a, b], 2)
    _check([a, b], 0)


def test_channels_last_inputs_keep_the_layout() -> None:
    parts = [
        _rand((2, c, 5, 3), torch.float16, c).to(memory_format=torch.channels_last) for c in (3, 4)
    ]
    _check(parts, 1)


def test_empty_and_legacy_empty_inputs() -> None:
    a = _rand((2, 3), torch.float32, 1)
    _check([a, torch.empty(2, 0, device=DEVICE), a], 1)
    _check([torch.empty(0, device=DEVICE), a, a], 0)


def test_mixed_dtypes_promote() -> None:
    a = _rand((2, 3), torch.float16, 1)
    b = torch.arange(6, dtype=torch.int64, device=DEVICE).view(2, 3)
    c = torch.tensor([[True, False, True]], device=DEVICE)
    _check([a, b, c.to(torch.float32)], 0)
    _check([b, c], 0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64, torch.int32, torch.bool])
def test_dtypes(dtype: torch.dtype) -> None:
    parts = [_rand((3, 4), torch.float32, i).to(dtype) for i in range(3)]
    _check(parts, 1)


def test_out_variant_and_repeated_calls_use_the_cached_plan() -> None:
    parts = [_rand((2, 3), torch.float32, i) for i in range(3)]
    out = torch.empty(2, 9, device=DEVICE)
    got = kcopy.cat_out(parts, 1, out=out)
    assert got is out and torch.equal(out, torch.cat(parts, 1))
    again = [p + 1 for p in parts]  # same layouts, new data: the cached plan, new pointers
    assert torch.equal(kcopy.cat(again, 1), torch.cat(again, 1))


def _launches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict]]:
    calls: list[tuple[str, dict]] = []
    for name in ("_cat", "_cat8"):
        launch = getattr(kcopy, name)

        def counted(g, a, _launch=launch, _name=name, **c):  # noqa: ANN001, ANN202
            calls.append((_name, c))
            _launch(g, a, **c)

        monkeypatch.setattr(kcopy, name, counted)
    return calls


@pytest.mark.slow
def test_traced_head_views_are_one_vectorised_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The traced cat of four [B, 12, 64, 64] head views of a [B, 64, 768] projection
    and a [B, 12, 192, 64] slice of a longer cache: five inputs, one launch, 64-element
    rows with stride 1 on both sides (vectors of 8)."""
    calls = _launches(monkeypatch)
    for batch in (1, 2):
        heads = [
            _rand((batch, 64, 768), torch.float16, i).view(batch, 64, 12, 64).transpose(1, 2)
            for i in range(4)
        ]
        cache = _rand((batch, 12, 336, 64), torch.float16, 7)[:, :, 100:292]
        calls.clear()
        _check([*heads, cache], 2)
        assert [(n, c["PARTS"], c["VEC"], c["UNIT"]) for n, c in calls] == [("_cat8", 5, 8, True)]


def test_launches_by_input_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to four inputs: the four-slot kernel; five to eight: the eight-slot one;
    more: eight at a time, the rest in a four-slot launch where it fits."""
    calls = _launches(monkeypatch)
    for count, kernels in ((2, ["_cat"]), (4, ["_cat"]), (5, ["_cat8"]), (8, ["_cat8"]),
                           (11, ["_cat8", "_cat"]), (17, ["_cat8", "_cat8", "_cat"])):  # fmt: skip
        parts = [_rand((2, k % 3 + 1, 4), torch.float32, k) for k in range(count)]
        calls.clear()
        _check(parts, 1)
        assert [n for n, _ in calls] == kernels


def test_vector_width_follows_the_sizes_and_strides(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of 6 (vectors of 2), odd rows (no vectors), a transposed input (inner
    stride not 1: no vectors), an offset view and a dtype conversion."""
    calls = _launches(monkeypatch)
    a = _rand((3, 5, 6), torch.float16, 1)
    b = _rand((3, 2, 6), torch.float16, 2)
    _check([a, b], 1)
    assert calls[-1][1]["VEC"] == 2
    _check([a[..., :5], b[..., 1:]], 1)
    assert calls[-1][1]["VEC"] == 1
    _check([a, _rand((3, 6, 2), torch.float16, 3).transpose(1, 2)], 1)
    assert not calls[-1][1]["UNIT"]
    big = _rand((4, 64), torch.float16, 4)
    _check([big[1:], big[:2], big[2:].float()], 0)
