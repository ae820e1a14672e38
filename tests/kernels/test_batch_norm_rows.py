"""Batch norm's row kernels (channels-last and 2-D inputs) with ``BN_ROW_VECTORS`` on:
each row's channels read and written ``CV`` at a time where every tensor's channels are
adjacent and the channel count and row strides are multiples of ``CV``. Against eager and
a float64 reference on the CPU (Triton's interpreter), forward (training and eval, the
running statistics) and backward (every output mask), with the ``CV`` each launch took;
their sm_90 code: ``test_kernel_ptx.py``."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import assert_batch_norm_both_ways, launch_constants  # noqa: E402
from kernel_checks import seeded_randn as _r  # noqa: E402

from opbench.kernels._lib import batch_norm as bn  # noqa: E402
from opbench.kernels._lib import batch_norm_backward as bn_bwd  # noqa: E402

aten = torch.ops.aten


def _record_cv(monkeypatch) -> list[int]:
    """The ``CV`` of every row-kernel launch from now on (stats, apply, reduce, apply)."""
    return launch_constants(
        monkeypatch,
        (
            (bn, "_bn_stats"),
            (bn, "_bn_apply"),
            (bn_bwd, "_bn_bwd_reduce"),
            (bn_bwd, "_bn_bwd_apply"),
        ),
        "CV",
    )


# name: (input, and the CV every launch must take)
CASES = {
    "2d_24": (lambda: _r((10, 24), torch.float16, 1), 8),
    "2d_12": (lambda: _r((10, 12), torch.float16, 2), 4),
    "2d_6": (lambda: _r((10, 6), torch.float16, 3), 2),
    "2d_5": (lambda: _r((10, 5), torch.float16, 4), 1),
    "cl_16": (lambda: _r((2, 16, 3, 5), torch.float16, 5).to(memory_format=torch.channels_last), 8),
    "cl_12": (lambda: _r((2, 12, 3, 3), torch.float32, 6).to(memory_format=torch.channels_last),
              4),
    # rows 10 apart (a column slice of a 2-D tensor): only pairs
    "2d_rows_10": (lambda: _r((9, 10), torch.float32, 7)[:, :8], 2),
}  # fmt: skip


@pytest.mark.parametrize("vectors", [True, False], ids=["vectors", "scalars"])
@pytest.mark.parametrize("case", list(CASES))
def test_row_kernels_with_channel_vectors(case: str, vectors: bool, monkeypatch) -> None:
    monkeypatch.setattr(bn, "BN_ROW_VECTORS", vectors)
    seen = _record_cv(monkeypatch)
    make, cv = CASES[case]
    x = make()
    C = x.shape[1]
    w, b = _r((C,), x.dtype, 11), _r((C,), x.dtype, 12)
    rm, rv = _r((C,), torch.float32, 13), _r((C,), torch.float32, 14).abs() + 0.5
    if x.dtype != torch.float32:
        rm, rv = rm.to(x.dtype), rv.to(x.dtype)
    g = torch.empty_like(x).copy_(_r(tuple(x.shape), x.dtype, 15))  # laid out as x
    assert_batch_norm_both_ways(bn.batch_norm, bn_bwd.batch_norm_backward, x, w, b, rm, rv, g)
    want = cv if vectors else 1
    # CUDA eager's eval-mode backward returns grad_input contiguous whatever the input's
    # layout (batch_norm_backward._cuda_returns): that apply launch writes channels a
    # plane apart, one at a time; every other launch takes the input's vectors
    contiguous_dx = x.is_cuda and x.dim() > 2
    assert seen and want in seen and set(seen) <= {want, 1 if contiguous_dx else want}, seen


def test_row_vector_needs_adjacent_channels(monkeypatch) -> None:
    """``row_vector``: the widest of 8, 4, 2, 1 dividing the channel count and every row
    and image stride, 1 where a tensor's channels are not adjacent or the setting is off."""
    monkeypatch.setattr(bn, "BN_ROW_VECTORS", True)
    assert bn.row_vector(64, (64, 1, 64), (64, 1, 64)) == 8
    assert bn.row_vector(64, (64, 1, 64), (68, 1, 68)) == 4
    assert bn.row_vector(64, (64, 1, 64), (64, 2, 64)) == 1
    assert bn.row_vector(30, (30, 1, 30)) == 2
    monkeypatch.setattr(bn, "BN_ROW_VECTORS", False)
    assert bn.row_vector(64, (64, 1, 64)) == 1


def test_the_probe_picks_the_rows_these_kernels_serve(monkeypatch) -> None:
    """``benchmarks/probes/bn_plane_runs.py --rows`` times traced rows whose first tensor
    is 2-D or channels-last (a channel stride of 1), the inputs the row kernels serve, and
    leaves NCHW ones (the planes kernels') out."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks" / "probes"))
    import bn_plane_runs

    picks = bn_plane_runs._row_layout
    assert picks("((T([25088, 256], f16), T([256], f16), None), {})")
    assert picks("((T([5, 64, 3, 3], f16, stride=(576, 1, 192, 64)), T([64], f16)), {})")
    assert not picks("((T([64, 32, 112, 112], f16), T([32], f16)), {})")
    assert not picks("((T([1, 16, 27], f16), T([16], f16)), {})")
    assert not picks("((T([4, 1, 8, 8], f16, stride=(64, 64, 8, 1)), T([1], f16)), {})")


def test_the_probe_checks_each_variant_and_restores_the_defaults(monkeypatch) -> None:
    """``bn_plane_runs.py --variant``: a row is checked against eager under each variant's
    settings (on the CPU, untimed) and the module's settings and plans are the defaults'
    after; a variant whose kernels compute wrong is an error, not a row."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks" / "probes"))
    import bn_plane_runs

    row = {
        "half": "tuning", "op": "native_batch_norm.default", "weight": 1,
        "args": "((T([40, 24], f32), T([24], f32), T([24], f32), T([24], f32), T([24], f32), "
                "True, 0.1, 1e-05), {})",
    }  # fmt: skip
    before = (bn.BN_MERGE_TILE, bn.BN_ROW_VECTORS)
    out = bn_plane_runs.measure(
        row, True, {"tile16": ["batch_norm.BN_MERGE_TILE=16", "batch_norm.BN_TILE=64"]}, "cpu"
    )
    assert out["variants"]["tile16"]["correct"] and "ms" not in out["variants"]["tile16"]
    assert (bn.BN_MERGE_TILE, bn.BN_ROW_VECTORS) == before
    assert not bn._BN_FWD_PLANS  # the variant's plans gone with it
    # a variant under which the kernels compute wrong (here: y left unwritten under the
    # variant's setting alone) raises: the run records an error row, not a time
    real = bn._bn_apply

    def broken_under_tile16(grid, args, **k):
        return None if bn.BN_MERGE_TILE == 16 else real(grid, args, **k)

    monkeypatch.setattr(bn, "_bn_apply", broken_under_tile16)
    bn_plane_runs.measure(row, True, {}, "cpu")  # the defaults still right
    with pytest.raises(AssertionError):
        bn_plane_runs.measure(row, True, {"tile16": ["batch_norm.BN_MERGE_TILE=16"]}, "cpu")
