"""``benchmarks/probes/conv_heldout.py`` on the CPU (Triton's interpreter): the rows of each
half of the traces, and the path each row is served by, read from the launchers that ran
(the report groups its speed-ups by these), each result checked against eager."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: a tuning model and a held-out one (src/opbench/suites/trace_split.json)
TUNING, HELDOUT = "adv_inception_v3_training", "beit_base_patch16_224_training"
SHARED = "((T([2, 3, 9, 9], f32), T([8, 3, 3, 3], f32), None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1), {})"  # fmt: skip
DEPTHWISE = "((T([2, 4, 8, 8], f32), T([4, 1, 3, 3], f32), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 4), {})"  # fmt: skip
POINTWISE = "((T([2, 8, 6, 6], f32), T([16, 8, 1, 1], f32), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})"  # fmt: skip
#: 160 channels x 3 x 3 = 1,440 pairs a output: past the flattened kernel's 1,024
GEMM = "((T([1, 160, 4, 4], f32), T([8, 160, 3, 3], f32), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})"  # fmt: skip
DOUBLE = "((T([2, 4, 6, 6], f64), T([4, 4, 3, 3], f64), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})"  # fmt: skip
DW_BACKWARD = "((T([2, 4, 8, 8], f32), T([2, 4, 8, 8], f32), T([4, 1, 3, 3], f32), [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 4, [True, True, False]), {})"  # fmt: skip
BACKWARD = "((T([2, 8, 6, 6], f32), T([2, 64, 6, 6], f32), T([8, 64, 3, 3], f32), [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False]), {})"  # fmt: skip


@pytest.fixture
def conv_heldout(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "probes"))
    import conv_heldout

    yield conv_heldout
    sys.modules.pop("conv_heldout", None)


def _traces(root: Path) -> Path:
    folder = root / "timm_train"
    folder.mkdir(parents=True)
    (folder / f"{TUNING}.txt").write_text(
        "Operator: aten.convolution.default\n"
        f"cnt: 3, {DEPTHWISE}\ncnt: 2, {POINTWISE}\ncnt: 1, {SHARED}\n"
        f"Operator: aten.convolution_backward.default\ncnt: 2, {DW_BACKWARD}\ncnt: 1, {BACKWARD}\n"
    )
    (folder / f"{HELDOUT}.txt").write_text(
        f"Operator: aten.convolution.default\ncnt: 5, {GEMM}\ncnt: 4, {DOUBLE}\ncnt: 1, {SHARED}\n"
    )
    return root


def test_each_half_holds_its_own_rows_most_used_first(conv_heldout, tmp_path):
    traces = str(_traces(tmp_path))
    tuning = conv_heldout.rows(traces, "tuning", None)
    assert [r["args"] for r in tuning] == [DEPTHWISE, POINTWISE, SHARED, DW_BACKWARD, BACKWARD]
    heldout = conv_heldout.rows(traces, "heldout", None)
    # a row a tuning model uses is never held out
    assert [r["args"] for r in heldout] == [GEMM, DOUBLE]
    assert [r["args"] for r in conv_heldout.rows(traces, "tuning", 1)] == [DEPTHWISE, DW_BACKWARD]


def test_rows_of_some_ops_and_argument_texts(conv_heldout, tmp_path):
    """``--ops`` and ``--match``: the depthwise backward rows alone."""
    traces = str(_traces(tmp_path))
    picked = conv_heldout.rows(traces, "tuning", None, ("convolution_backward.default",),
                               r"T\(\[\d+, 1, \d+")  # fmt: skip
    assert [r["args"] for r in picked] == [DW_BACKWARD]
    assert conv_heldout.rows(traces, "heldout", None, match=r"T\(\[\d+, 1, \d+") == []


def test_rows_at_another_batch(conv_heldout, tmp_path):
    """``--batch 1``: each row's activations at one image, the weight's sizes and every
    stride kept; each rewritten row still parses into tensors eager convolves."""
    import torch

    from opbench.spec.args import parse_args
    from opbench.suites.inputs import make_inputs

    traces = str(_traces(tmp_path))
    picked = conv_heldout.rows(traces, "tuning", None, batch=1)
    one = [r["args"] for r in picked]
    assert one[0] == DEPTHWISE.replace("T([2, 4, 8, 8]", "T([1, 4, 8, 8]")
    assert DW_BACKWARD.replace("T([2, 4, 8, 8]", "T([1, 4, 8, 8]") in one
    assert BACKWARD.replace("T([2, 8, 6, 6]", "T([1, 8, 6, 6]").replace(
        "T([2, 64, 6, 6]", "T([1, 64, 6, 6]") in one  # fmt: skip
    assert all("T([4, 1, 3, 3]" in a for a in one if "4, 1, 3, 3" in a)  # weights alone
    cl = "((T([2, 4, 5, 5], f16, stride=(100, 1, 20, 4)), T([4, 1, 3, 3], f16), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 4), {})"  # fmt: skip
    assert conv_heldout.with_batch("convolution.default", cl, 3).startswith(
        "((T([3, 4, 5, 5], f16, stride=(100, 1, 20, 4)), T([4, 1, 3, 3]"
    )  # fmt: skip
    for r in picked:
        args, kw = make_inputs(r["op"], parse_args(r["args"]), "cpu", 0)
        getattr(torch.ops.aten, r["op"].split(".")[0])(*args, **kw)
    doubled = conv_heldout.rows(traces, "tuning", None, batch=2)  # the rows' own batch
    assert [r["args"] for r in doubled] == [
        r["args"] for r in conv_heldout.rows(traces, "tuning", None)
    ]


def test_rows_made_channels_last(conv_heldout, tmp_path):
    """``--channels-last``: each row's activations (the backward's grad_output and input)
    get the strides ``torch.channels_last`` gives, the weight and tensors already
    channels-last left alone; each rewritten row still parses into tensors of those
    strides that eager convolves."""
    import torch

    from opbench.spec.args import parse_args
    from opbench.suites.inputs import make_inputs

    traces = str(_traces(tmp_path))
    picked = conv_heldout.rows(traces, "tuning", None, channels_last=True)
    for r in picked:
        args, kw = make_inputs(r["op"], parse_args(r["args"]), "cpu", 0)
        acts = args[:2] if r["op"].startswith("convolution_backward") else args[:1]
        for t in acts:
            assert t.is_contiguous(memory_format=torch.channels_last), (r["args"], t.stride())
        weight = args[2] if r["op"].startswith("convolution_backward") else args[1]
        assert weight.is_contiguous()
        getattr(torch.ops.aten, r["op"].split(".")[0])(*args, **kw)
    cl = "((T([2, 4, 5, 5], f16, stride=(100, 1, 20, 4)), T([4, 1, 3, 3], f16), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 4), {})"  # fmt: skip
    assert conv_heldout.with_channels_last("convolution.default", cl) == cl
    one_d = "((T([2, 6, 13], f32), T([6, 1, 5], f32), None, [1], [2], [1], False, [0], 6), {})"
    assert conv_heldout.with_channels_last("convolution.default", one_d).startswith(
        "((T([2, 6, 13], f32, stride=(78, 1, 6)), T([6, 1, 5], f32), None"
    )


def test_strided_rows_alone(conv_heldout, tmp_path):
    """``--strided``: a stride above 1 in any dimension, read from the parsed arguments
    (the stride sits after the bias in the forward, after the bias sizes in the backward)."""
    traces = str(_traces(tmp_path))
    assert [r["args"] for r in conv_heldout.rows(traces, "tuning", None, only_strided=True)] == [
        SHARED
    ]
    assert conv_heldout.rows(traces, "heldout", None, only_strided=True) == []
    bwd = "((T([2, 8, 3, 6], f16), T([2, 4, 6, 6], f16), T([8, 4, 2, 1], f16), {}, [{}], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]), {{}})"  # fmt: skip
    assert conv_heldout.strided("convolution_backward.default", bwd.format("[8]", "2, 1"))
    assert conv_heldout.strided("convolution_backward.default", bwd.format("None", "1, 2"))
    assert not conv_heldout.strided("convolution_backward.default", bwd.format("[0]", "1, 1"))
    fwd = "((T([2, 4, 6, 6], f16), T([8, 4, 3, 3], f16), T([8], f16), [1, 3], [1, 1], [1, 1], False, [0, 0], 1), {})"  # fmt: skip
    assert conv_heldout.strided("convolution.default", fwd)
    assert not conv_heldout.strided("convolution.default", POINTWISE)


def test_the_path_is_the_launchers_that_ran_and_every_result_agrees(conv_heldout, tmp_path):
    traces = str(_traces(tmp_path))
    got = {
        r["args"]: conv_heldout.measure(r, "cpu")
        for half in conv_heldout.HALVES
        for r in conv_heldout.rows(traces, half, None)
    }
    assert got[DEPTHWISE]["path"] == "depthwise (direct)"
    assert got[POINTWISE]["path"] == "pointwise (matmul kernel)"
    assert got[SHARED]["path"] == "small reduction (flattened)"
    assert got[GEMM]["path"] == "implicit GEMM (channels-last)"
    assert got[BACKWARD]["path"] == "small reduction (flattened) + weight grad (implicit GEMM)"
    assert got[DW_BACKWARD]["path"] == "depthwise (direct) + depthwise weight grad (plane)"
    assert got[DOUBLE]["path"] == "declined"  # PyTorch serves float64
    assert all(m["correct"] for a, m in got.items() if a != DOUBLE)
    assert not any("speedup" in m for m in got.values())  # nothing timed on the CPU
    table = conv_heldout.summarize(list(got.values()))
    heldout_all = next(t for t in table if (t["half"], t["path"]) == ("heldout", "all"))
    assert heldout_all["rows"] == 2 and heldout_all["declined"] == 1 and heldout_all["wrong"] == 0


def test_a_wrong_result_is_reported_and_never_timed(conv_heldout, tmp_path, monkeypatch):
    from opbench.kernels._lib import conv

    real = conv.convolution
    monkeypatch.setattr(conv, "convolution", lambda *a, **k: real(*a, **k) * 1.5)
    row = {"half": "tuning", "op": "convolution.default", "args": POINTWISE, "weight": 1}
    m = conv_heldout.measure(row, "cpu")
    assert m["correct"] is False and "speedup" not in m


def test_variants_are_served_and_checked_apart(conv_heldout, tmp_path):
    """``--variant``: the row again under other settings (here the channels-last kernel
    turned off), its own path and check; ``--paths``: rows of other paths left untimed."""
    row = {"half": "heldout", "op": "convolution.default", "args": GEMM, "weight": 1}
    m = conv_heldout.measure(row, "cpu", {"general": ["conv_nhwc.NHWC_MIN_CIN=100000"]})
    assert m["path"] == "implicit GEMM (channels-last)" and m["correct"]
    assert (
        m["variants"]["general"]["path"] == "implicit GEMM" and m["variants"]["general"]["correct"]
    )
    from opbench.kernels._lib import conv_nhwc

    assert conv_nhwc.NHWC_MIN_CIN < 100000  # restored
    skipped = conv_heldout.measure(dict(row, args=POINTWISE), "cpu", paths="implicit GEMM")
    assert skipped["skipped"] and "variants" not in skipped
    table = conv_heldout.summarize([m, skipped])
    assert {t["path"] for t in table} >= {"[general] all", "[general] implicit GEMM"}
    assert next(t for t in table if t["path"] == "all")["rows"] == 1
    assert m["variants"]["general"]["changed"] and "launches" not in m


def test_a_variant_that_launches_as_the_defaults_is_the_noise_floor(conv_heldout):
    """A variant whose launches (kernels, grids, tiles) are the defaults' is marked
    unchanged, and the effects table keeps such rows apart from the changed ones: their
    ratio is the timing's noise, not the variant's."""
    from opbench.kernels._lib import conv

    row = {"half": "heldout", "op": "convolution.default", "args": GEMM, "weight": 1}
    variants = {
        "same": [f"conv.DW_WARPS={conv.DW_WARPS}"],  # a depthwise setting: no change here
        "general": ["conv_nhwc.NHWC_MIN_CIN=100000"],
    }
    m = conv_heldout.measure(row, "cpu", variants)
    assert not m["variants"]["same"]["changed"] and m["variants"]["general"]["changed"]
    # made-up timings: the effects table sorts each variant's rows by whether it changed
    m = dict(m, speedup=1.0, device_speedup=1.0)
    m["variants"]["same"].update(speedup=1.1, device_speedup=1.0)
    m["variants"]["general"].update(speedup=0.5, device_speedup=0.8)
    effects = {(e["variant"], e["rows"]): e for e in conv_heldout.variant_effects([m])}
    same = effects[("same", "unchanged (noise floor)")]
    assert same["count"] == 1 and same["vs_defaults"] == 1.1 and same["device_vs_defaults"] == 1.0
    assert effects[("general", "changed")]["vs_defaults"] == 0.5
    text = "\n".join(conv_heldout.markdown({"date": "D", "device": "G", "torch": "T",
        "limit": 1, "rows_measured": "1 of 1", "table": [], "variant_effects":
        list(effects.values()), "command": "C"}))  # fmt: skip
    assert (
        "| same | heldout | convolution.default | unchanged (noise floor) | 1 | 1.1 | 1.0 |" in text
    )


def test_a_backward_that_copies_grad_output_once_is_changed(conv_heldout, monkeypatch):
    """A variant that launches the same paths but copies ``grad_output`` to channels-last
    for each gradient (``NHWC_SHARE_COPIES`` off: one copy launch more) is a changed row,
    not the noise floor; a setting that changes nothing here stays unchanged."""
    from opbench.kernels._lib import conv, conv_nhwc, conv_nhwc_wgrad

    monkeypatch.setattr(conv_nhwc, "NHWC_MIN_CIN", 1)  # both gradients channels-last
    monkeypatch.setattr(conv_nhwc_wgrad, "NHWC_WGRAD_MIN_CHANNELS", 1)
    args = "((T([2, 32, 6, 5], f16), T([2, 64, 6, 5], f16), T([32, 64, 3, 3], f16), [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False]), {})"  # fmt: skip
    row = {"half": "heldout", "op": "convolution_backward.default", "args": args, "weight": 1}
    variants = {"apart": ["channels_last_copy.NHWC_SHARE_COPIES=False"],
                "same": [f"conv.DW_WARPS={conv.DW_WARPS}"]}  # fmt: skip
    m = conv_heldout.measure(row, "cpu", variants)
    assert m["path"] == "implicit GEMM (channels-last) + weight grad (channels-last)", m
    apart, same = m["variants"]["apart"], m["variants"]["same"]
    assert apart["path"] == m["path"] and apart["correct"] and m["correct"]
    assert apart["changed"] and not same["changed"]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_channels_last_depthwise_backward_is_served_by_its_walks(conv_heldout, dtype):
    """The path of a channels-last depthwise backward names its kernels: the row walk for
    the input gradient; for the weight gradient the channels-last walk in 16 bits, the
    tap rows in float32 (whose Kahan sums the walk does not keep)."""
    cl = f"T([2, 16, 8, 8], {dtype}, stride=(1024, 1, 128, 16))"
    args = f"(({cl}, {cl}, T([16, 1, 3, 3], {dtype}), [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 16, [True, True, False]), {{}})"  # fmt: skip
    row = {"half": "heldout", "op": "convolution_backward.default", "args": args, "weight": 1}
    m = conv_heldout.measure(row, "cpu")
    wgrad = "tap rows" if dtype == "f32" else "channels-last walk"
    assert m["path"] == f"depthwise channels-last (row walk) + depthwise weight grad ({wgrad})", m
    assert m["correct"]


def test_a_variant_never_runs_a_plan_kept_under_other_settings(conv_heldout):
    """A depthwise forward's kept run is reused while the settings it names are unchanged;
    a variant that reroutes the call through a setting outside them (``DW_MAX_MULT``: no
    convolution is depthwise) must still be rerouted, and must leave no plan behind."""
    from opbench.kernels._lib import conv

    row = {"half": "heldout", "op": "convolution.default", "args": DEPTHWISE, "weight": 1}
    m = conv_heldout.measure(row, "cpu", {"no_depthwise": ["conv.DW_MAX_MULT=0"]})
    assert m["path"] == "depthwise (direct)" and m["correct"]
    v = m["variants"]["no_depthwise"]
    assert v["path"] != "depthwise (direct)" and v["correct"], v
    assert not conv._FORWARD_PLANS  # dropped on the way out
