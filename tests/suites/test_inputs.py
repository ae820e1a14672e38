"""Inputs from a spec: exact layouts, reproducible values, valid operator-specific values.

Validity is checked by running the real PyTorch operator on the generated inputs (it
raises on an out-of-range index) and by comparing derived values (saved statistics, pool
indices) with what PyTorch's own forward computes.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap

import pytest
import torch

from opbench.spec.args import parse_args
from opbench.spec.ops import get_overload
from opbench.suites.inputs import NotRunnable, make_inputs


def build(op: str, text: str, seed: int = 0, device: str = "cpu"):
    return make_inputs(op, parse_args(text), device, seed)


def run(op: str, text: str, seed: int = 0):
    args, kwargs = build(op, text, seed)
    return args, kwargs, get_overload(op)(*args, **kwargs)


def digest(values) -> str:
    h = hashlib.sha256()
    for v in values:
        if isinstance(v, torch.Tensor):
            h.update(str((tuple(v.shape), v.stride(), v.dtype)).encode())
            h.update(v.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- layout


def test_strides_are_honoured_keyword_and_positional() -> None:
    (a, b), _ = build("add.Tensor", "((T([4, 5], f32, stride=(1, 4)), T([4, 5], f32, [1, 4])), {})")
    assert a.stride() == (1, 4) and b.stride() == (1, 4)
    assert not a.is_contiguous()
    assert a.untyped_storage().nbytes() == 20 * 4


def test_stride_zero_is_expanded_not_copied() -> None:
    (t, _), _ = build("div.Scalar", "((T([96, 1000], f16, stride=(0, 0)), 2), {})")
    assert t.shape == (96, 1000) and t.stride() == (0, 0)
    assert t.untyped_storage().nbytes() == 2  # one f16 element shared by every position
    assert (t == t[0, 0]).all()
    (u, _), _ = build("div.Scalar", "((T([4, 512, 768], f32, stride=(512, 1, 0)), 768), {})")
    assert u.stride() == (512, 1, 0)
    assert u.untyped_storage().nbytes() == 4 * (1 + 3 * 512 + 511)
    assert torch.equal(u[:, :, 0], u[:, :, 767])


def test_zero_size_and_scalar_tensors() -> None:
    (e, s), _ = build("add.Tensor", "((T([0, 182], f16), T([], f32)), {})")
    assert e.shape == (0, 182) and s.shape == () and s.dtype == torch.float32


def test_meta_device_builds_layouts_without_data() -> None:
    (t,), _ = build("relu.default", "((T([8, 3, 12], f16, stride=(36, 1, 3)),), {})", device="meta")
    assert t.is_meta and t.stride() == (36, 1, 3)


# --------------------------------------------------------------------------- values


def test_reproducible_within_a_process_and_seed_sensitive() -> None:
    text = "((T([64, 33], f16), T([33], bf16), T([5], i64), T([7], b8), T([3], c64)), {})"
    first = digest(build("add.Tensor", text, seed=3)[0])
    assert first == digest(build("add.Tensor", text, seed=3)[0])
    assert first != digest(build("add.Tensor", text, seed=4)[0])


@pytest.mark.slow
def test_reproducible_across_processes() -> None:
    text = "((T([300, 7], f32, stride=(1, 300)), T([9], i64)), {})"
    here = digest(build("add.Tensor", text, seed=11)[0])
    code = textwrap.dedent(
        f"""
        import hashlib, torch
        from opbench.spec.args import parse_args
        from opbench.suites.inputs import make_inputs
        h = hashlib.sha256()
        for v in make_inputs("add.Tensor", parse_args({text!r}), "cpu", 11)[0]:
            h.update(str((tuple(v.shape), v.stride(), v.dtype)).encode())
            h.update(v.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        print(h.hexdigest())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == here


def test_float_values_have_both_signs_and_varied_magnitude() -> None:
    (x,), _ = build("relu.default", "((T([100000], f32),), {})")
    neg = (x < 0).float().mean().item()
    assert 0.4 < neg < 0.6
    mag = x.abs()
    assert mag.max() > 4 and (mag < 0.05).any()
    assert not ((x >= 0) & (x < 1)).all()


@pytest.mark.parametrize(
    "op", ["log2.default", "sqrt.default", "rsqrt.default", "log.default", "log1p.default"]
)
def test_positive_domain(op: str) -> None:
    (x,), _, out = run(op, "((T([4096], f32),), {})")
    assert (x > 0).all()
    assert torch.isfinite(out).all()


def test_pow_fractional_exponent_gets_positive_base() -> None:
    (x, _), _, out = run("pow.Tensor_Scalar", "((T([1000], f16), 0.5), {})")
    assert (x > 0).all() and not out.isnan().any()


def test_pow_scalar_base_stays_representable() -> None:
    _, _, out = run("pow.Scalar", "((10000, T([512], f16)), {})")
    assert torch.isfinite(out).all()


def test_isnan_and_eq_are_not_constant() -> None:
    _, _, out = run("isnan.default", "((T([2048], f16),), {})")
    assert out.any() and not out.all()
    _, _, out = run("isinf.default", "((T([2048], f32),), {})")
    assert out.any() and not out.all()
    _, _, out = run("eq.Scalar", "((T([2048], f16), 1), {})")
    assert out.any() and not out.all()


def test_integer_divisor_has_no_zero() -> None:
    (_, d), _, _ = run("floor_divide.default", "((T([4096], i64), T([4096], i64)), {})")
    assert (d != 0).all()


def test_bool_masks() -> None:
    (x, m, _), _, out = run(
        "masked_fill.Scalar", "((T([64, 64], f16), T([64, 64], b8), -65504.0), {})"
    )
    assert m.dtype == torch.bool and m.any() and not m.all()


# --------------------------------------------------------------------------- index ranges: the real op must accept them

VALID_INDEX_CASES = [
    ("embedding.default", "((T([300, 16], f16), T([2, 512], i64), 0), {})"),
    (
        "embedding_dense_backward.default",
        "((T([1, 512, 16], f32), T([1, 512], i64), 50, -1, False), {})",
    ),
    ("gather.default", "((T([8, 128], i64), 1, T([8, 1], i64)), {})"),
    ("scatter.src", "((T([4, 19, 10], f16), 1, T([4, 5, 10], i64), T([4, 5, 10], f16)), {})"),
    ("scatter_add.default", "((T([965], f32), 0, T([5476], i64), T([5476], f32)), {})"),
    (
        "scatter_add_.default",
        "((T([1, 50, 9], f16), 2, T([1, 50, 1], i64), T([1, 50, 1], f16)), {})",
    ),
    ("index.Tensor", "((T([16, 64], f32), [T([504], i64)]), {})"),
    ("index.Tensor", "((T([3, 16, 64], f32), [None, T([5], i64), T([5], i64)]), {})"),
    (
        "index_put.default",
        "((T([4, 102, 2], f16), [T([4], i64), T([4], i64)], T([4, 2], f16), True), {})",
    ),
    ("index_put_.default", "((T([6, 47], i64), [T([6], i64), T([6], i64)], T([], i64)), {})"),
    (
        "_index_put_impl_.default",
        "((T([6, 47, 8], f16), [T([6, 47], i64, stride=(1, 0)), T([6, 47], i64, stride=(48, 1))], T([6, 47, 8], f16), True, True), {})",
    ),
    ("index_select.default", "((T([19, 6, 6], f16), 0, T([50], i64)), {})"),
    ("index_add.default", "((T([19, 6, 6], f16), 0, T([50], i64), T([50, 6, 6], f16)), {})"),
    ("nll_loss_forward.default", "((T([128, 300], f32), T([128], i64), None, 1, -100), {})"),
    (
        "_embedding_bag.default",
        "((T([96, 12], f32), T([548], i64), T([100], i64), False, 0, True, T([548], f32)), {})",
    ),
    (
        "_embedding_bag_per_sample_weights_backward.default",
        "((T([100, 12], f32, stride=(47, 1)), T([96, 12], f32), T([548], i64), T([100], i64), T([548], i64), 0), {})",
    ),
]


@pytest.mark.parametrize("op,text", VALID_INDEX_CASES)
def test_index_inputs_are_accepted_by_the_real_op(op: str, text: str) -> None:
    run(op, text)


def test_scatter_without_reduction_gets_unique_targets() -> None:
    (_, _, index, _), _, _ = run(
        "scatter.src", "((T([4, 19, 10], f16), 1, T([4, 5, 10], i64), T([4, 5, 10], f16)), {})"
    )
    for i in range(4):
        for k in range(10):
            col = index[i, :, k]
            assert col.unique().numel() == col.numel()


def test_index_put_without_accumulate_gets_unique_positions() -> None:
    (_, (i0, i1), _, _), _, _ = run(
        "index_put.default",
        "((T([4, 5, 2], f16), [T([12], i64), T([12], i64)], T([12, 2], f16), False), {})",
    )
    lin = i0 * 5 + i1
    assert lin.unique().numel() == 12


def test_embedding_bag_offsets_are_sorted_and_start_at_zero() -> None:
    (_, _, offsets, *_), _, _ = run(
        "_embedding_bag.default",
        "((T([96, 12], f32), T([548], i64), T([100], i64), False, 0, True, T([548], f32)), {})",
    )
    assert offsets[0] == 0 and (offsets[1:] >= offsets[:-1]).all() and offsets[-1] <= 548


def test_nll_loss_targets_respect_ignore_index_and_total_weight() -> None:
    (grad, x, target, w, red, ignore, total), _, _ = run(
        "nll_loss_backward.default",
        "((T([], f32), T([256, 30], f32), T([256], i64), None, 1, -100, T([], f32)), {})",
    )
    valid = target != ignore
    assert ((target[valid] >= 0) & (target[valid] < 30)).all()
    assert (~valid).any() and valid.any()
    assert total.item() == valid.sum().item()


# --------------------------------------------------------------------------- saved tensors of backward ops


def test_max_pool_backward_indices_come_from_the_forward() -> None:
    (_, x, k, s, p, d, c, idx), _, _ = run(
        "max_pool2d_with_indices_backward.default",
        "((T([2, 3, 8, 8], f16, stride=(192, 64, 8, 1)), T([2, 3, 17, 17], f16), [3, 3], [2, 2], [0, 0], [1, 1], False, T([2, 3, 8, 8], i64)), {})",
    )
    _, expected = torch.ops.aten.max_pool2d_with_indices.default(x.float(), k, s, p, d, c)
    assert torch.equal(idx, expected)


def test_layer_norm_backward_statistics_match_the_forward() -> None:
    (_, x, shape, mean, rstd, *_), _, _ = run(
        "native_layer_norm_backward.default",
        "((T([2, 16, 32], f32), T([2, 16, 32], f32), [32], T([2, 16, 1], f32), T([2, 16, 1], f32), T([32], f32), T([32], f32), [True, True, True]), {})",
    )
    _, ref_mean, ref_rstd = torch.ops.aten.native_layer_norm.default(x, shape, None, None, 1e-5)
    torch.testing.assert_close(mean, ref_mean)
    torch.testing.assert_close(rstd, ref_rstd)


def test_batch_norm_backward_statistics_match_the_forward() -> None:
    (_, x, _, _, rvar, smean, sinv, *_), _, _ = run(
        "native_batch_norm_backward.default",
        "((T([8, 6, 5, 5], f32), T([8, 6, 5, 5], f32), T([6], f32), T([6], f32), T([6], f32), T([6], f32), T([6], f32), True, 0.001, [True, True, True]), {})",
    )
    assert (rvar > 0).all()
    _, ref_mean, ref_inv = torch.ops.aten.native_batch_norm.default(
        x, None, None, None, None, True, 0.1, 0.001
    )
    torch.testing.assert_close(smean, ref_mean)
    torch.testing.assert_close(sinv, ref_inv)


def test_group_norm_backward_statistics_match_the_forward() -> None:
    (_, x, mean, rstd, *_), _, _ = run(
        "native_group_norm_backward.default",
        "((T([4, 8, 7, 7], f32), T([4, 8, 7, 7], f32), T([4, 2], f32), T([4, 2], f32), T([8], f32), 4, 8, 49, 2, [True, True, True]), {})",
    )
    _, ref_mean, ref_rstd = torch.ops.aten.native_group_norm.default(
        x, None, None, 4, 8, 49, 2, 1e-5
    )
    torch.testing.assert_close(mean, ref_mean)
    torch.testing.assert_close(rstd, ref_rstd)


def test_softmax_backward_gets_a_softmax_output() -> None:
    (_, out, dim, _), _, _ = run(
        "_softmax_backward_data.default", "((T([4, 64], f32), T([4, 64], f32), -1, f32), {})"
    )
    torch.testing.assert_close(out.sum(-1), torch.ones(4))
    (_, lout, _, _), _, _ = run(
        "_log_softmax_backward_data.default", "((T([4, 64], f16), T([4, 64], f16), 1, f16), {})"
    )
    torch.testing.assert_close(lout.float().exp().sum(-1), torch.ones(4), atol=1e-2, rtol=1e-2)


def test_threshold_backward_self_sits_on_the_threshold() -> None:
    (_, x, _), _, _ = run("threshold_backward.default", "((T([4096], f32), T([4096], f32), 0), {})")
    assert (x >= 0).all() and (x == 0).any() and (x > 0).any()


# --------------------------------------------------------------------------- devices, names, refusals


def test_recorded_devices_map_to_the_run_device() -> None:
    _, kwargs = build(
        "new_ones.default",
        "((T([2, 3], f16), [4, 5]), {'dtype': f16, 'layout': torch.strided, 'device': 'cuda', 'pin_memory': False})",
    )
    assert kwargs["device"] == torch.device("cpu")
    assert kwargs["layout"] is torch.strided
    _, kwargs = build(
        "_to_copy.default",
        "((T([], f32),), {'dtype': f16, 'device': \"torch.device('cpu')\"})",
        device="meta",
    )
    assert kwargs["device"] == torch.device("meta")
    out = get_overload("_to_copy.default")(
        *build("_to_copy.default", "((T([3], f32),), {'device': 'cuda'})")[0], device="cpu"
    )
    assert out.device.type == "cpu"


def test_moving_to_a_device_keeps_layouts() -> None:
    """The path used for CUDA, exercised on the CPU: storage, offsets and strides survive."""
    from opbench.suites.inputs import _move

    text = "((T([40, 7], f16, stride=(1, 40)), T([7], f32, stride=(0,)), T([0, 3], i64)), {})"
    built = build("add.Tensor", text, seed=5)[0]
    moved = _move(built, torch.device("cpu"), {})
    for b, m in zip(built, moved):
        assert m.stride() == b.stride() and m.dtype == b.dtype and torch.equal(m, b)
    assert moved[1].untyped_storage().nbytes() == 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_inputs_match_cpu_bits() -> None:  # pragma: no cover - GPU machine only
    text = "((T([40, 7], f16, stride=(1, 40)), T([7], f32, stride=(0,))), {})"
    cpu = build("add.Tensor", text, seed=5)[0]
    gpu = build("add.Tensor", text, seed=5, device="cuda")[0]
    for c, g in zip(cpu, gpu):
        assert g.is_cuda and g.stride() == c.stride() and torch.equal(g.cpu(), c)


@pytest.mark.parametrize(
    "op,text",
    [
        (
            "_cudnn_rnn_backward.default",
            "((T([4, 5, 8], f16), [T([48, 8], f16)], 4, T([100], f16), T([1, 4, 12], f16), T([1, 4, 12], f16), T([4, 5, 12], f16), T([4, 5, 12], f16), None, None, 2, 12, 0, 1, True, 0.0, True, False, [], None, T([1000], u8), [True, False, False, True]), {})",
        ),
        (
            "fractional_max_pool2d_backward.default",
            "((T([1, 2, 4, 4], f32), T([1, 2, 8, 8], f32), [2, 2], [4, 4], T([1, 2, 4, 4], i64)), {})",
        ),
        ("scatter.src", "((T([4, 3], f32), 1, T([4, 5], i64), T([4, 5], f32)), {})"),
    ],
)
def test_not_runnable_is_raised_with_a_reason(op: str, text: str) -> None:
    with pytest.raises(NotRunnable) as info:
        build(op, text)
    assert info.value.reason


def test_copy_inputs_is_a_second_set_of_the_same_inputs():
    """The harness's float64 reference runs on a copy made before eager writes into its
    inputs: same values, strides and offsets, storages shared where the originals shared
    them, and none shared with the originals."""
    from opbench.suites.inputs import copy_inputs

    base = torch.arange(12.0)
    view = base.as_strided((2, 3), (1, 4), 2)
    idx = torch.tensor([0, 2])
    args, kwargs = copy_inputs([base, [view, idx], 3], {"out": base[:4]})
    c_base, (c_view, c_idx), scalar = args
    assert scalar == 3
    for orig, copy in ((base, c_base), (view, c_view), (idx, c_idx), (base[:4], kwargs["out"])):
        assert torch.equal(orig, copy) and orig.stride() == copy.stride()
        assert orig.storage_offset() == copy.storage_offset()
        assert orig.untyped_storage().data_ptr() != copy.untyped_storage().data_ptr()
    assert c_view.untyped_storage().data_ptr() == c_base.untyped_storage().data_ptr()
    assert kwargs["out"].untyped_storage().data_ptr() == c_base.untyped_storage().data_ptr()
    base.add_(1)  # what an in-place eager call does to its own inputs
    assert torch.equal(c_base, torch.arange(12.0))


def test_reference_on_copied_inputs_matches_redrawn_ones():
    """expect() builds the reference's inputs by copying eager's, not by drawing them
    again: an in-place op's reference must still see the values before eager wrote."""
    from opbench.judge.expectations import expect
    from opbench.suites.case import Case

    case = Case(op="add_.Tensor", args="((T([64, 33], f32), T([33], f32)), {})", seed=7)
    exp = expect(case, get_overload(case.op), "cpu", case.seed)
    args, _ = build(case.op, case.args, seed=case.seed)
    want = args[0].double() + args[1].double()
    assert torch.equal(exp.ref, want)
    assert torch.equal(exp.eager, (args[0] + args[1]))


def test_large_draws_are_chunks_of_their_own_streams():
    """A draw over DRAW_CHUNK elements is cut into chunks, each from its own seed, the
    same in every process; draws up to one chunk are those of one generator, as before
    chunking; a draw starts no thread (a worker's judge counts those it did not start)."""
    import threading

    from opbench.suites import input_call as ic

    n = 5 * ic.DRAW_CHUNK + 17
    before = threading.active_count()
    serial = ic.draw_seeded(n, torch.float16, ic.DEFAULT, seed=11)
    assert threading.active_count() == before
    assert serial.shape == (n,)
    g = torch.Generator().manual_seed(ic.mix_seed(11, ("chunk", 1)))
    second = ic.draw(ic.DRAW_CHUNK, torch.float16, ic.DEFAULT, g)
    chunk1 = serial[ic.DRAW_CHUNK : 2 * ic.DRAW_CHUNK]
    assert torch.equal(chunk1.view(torch.int16), second.view(torch.int16))
    assert not torch.equal(serial[: ic.DRAW_CHUNK], chunk1)
    small = ic.draw_seeded(100, torch.float32, ic.DEFAULT, seed=3)
    g = torch.Generator().manual_seed(3)
    assert torch.equal(small, ic.draw(100, torch.float32, ic.DEFAULT, g))
