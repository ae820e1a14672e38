"""The channels-last convolution kernels' sm_90 code, compiled on the CPU machine by
``benchmarks/probes/kernel_ptx.py`` (in a process of its own: these tests' kernels are
defined under Triton's interpreter): their operands must reach the tensor cores through
pipelined 16-byte copies. The weight gradient's first version passed every correctness
test and ran at 28 TFLOP/s on the H100 with 2-byte, unpipelined loads; this is the check
that would have said so without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]

COMMON = ["KD=1", "KH=3", "KW=3", "SD=1", "SH=1", "SW=1", "HAS_D=False", "IEEE=False",
          "TO_F32=False", "BIG=False", "BLOCK_M=128", "BLOCK_N=128"]  # fmt: skip


def _probe(*argv: str) -> dict[str, int]:
    """``kernel_ptx.py ARGV``'s counts, by family."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "probes" / "kernel_ptx.py"), *argv],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = {}
    for line in done.stdout.splitlines():
        n, _, family = line.strip().partition("  ")
        got[family.strip()] = int(n)
    return got


def _counts(kernel: str, *constexprs: str) -> dict[str, int]:
    return _probe(kernel, "--warps", "8", "--stages", "3", "--const", *COMMON, *constexprs)


@pytest.mark.slow
def test_the_weight_gradient_copies_16_byte_rows_into_wgmma():
    got = _counts("conv_nhwc_wgrad._nhwc_wgrad_kernel", "ALIGN=8", "EVEN_M=True",
                  "EVEN_N=True", "WALK=True", "BLOCK_K=32")  # fmt: skip
    assert got["cp.async 16-byte (.cg)"] > 0 and got["wgmma"] > 0, got
    assert not any(k.startswith("ld.global") and n for k, n in got.items()), got


@pytest.mark.slow
@pytest.mark.parametrize("flip", [False, True])
def test_the_forward_copies_16_byte_rows_and_stores_vectors(flip: bool):
    """Forward, and an input gradient's weight read with its taps reversed (``FLIP_W``)."""
    got = _counts("conv_nhwc._nhwc_kernel", "X_ALIGN=8", "EVEN_K=True", "Y_VEC=4",
                  "SPLIT=False", "PHASED=False", f"FLIP_W={flip}", "HAS_BIAS=False", "Y_CVEC=1",
                  "BLOCK_K=64")  # fmt: skip
    assert got["cp.async 16-byte (.cg)"] > 0 and got["wgmma"] > 0, got
    assert got.get("st.global.b16", 0) == 0 and got.get("st.global.v2.b32", 0) > 0, got


@pytest.mark.slow
def test_the_phased_transposed_mode_keeps_16_byte_copies():
    """A strided transposed convolution's phases (strides 2 x 2, passed after the common
    unit strides: the last value of a name wins) read the same 16-byte rows."""
    got = _counts("conv_nhwc._nhwc_kernel", "SH=2", "SW=2", "X_ALIGN=8", "EVEN_K=True",
                  "Y_VEC=1", "SPLIT=False", "PHASED=True", "FLIP_W=False", "HAS_BIAS=False", "Y_CVEC=1",
                  "BLOCK_K=64")  # fmt: skip
    assert got["cp.async 16-byte (.cg)"] > 0 and got["wgmma"] > 0, got
    assert not any(k.startswith("ld.global") and n for k, n in got.items()), got


@pytest.mark.slow
def test_the_tap_row_weight_gradient_reads_16_byte_runs_and_spills_nothing():
    """The channels-last depthwise weight gradient (a row of 7 taps, 64 channels), as a
    launch specializes it (unit channel strides, the rest divisible by 16): both tensors
    read in 16-byte vectors, no local memory (spills) and no stack."""
    got = _probe(
        "conv_depthwise_wgrad_rows._dwg_rows_kernel", "--warps", "4", "--stages", "3", "--sass",
        "--ones", "R_G", "as1", "bs1", "--div16", "C", "as0", "as3", "as4", "bs0", "bs3", "bs4",
        "--const", "KW=7", "SH=1", "SW=1", "BIG=False", "KAHAN=False", "BLOCK_W=8", "BLOCK_P=2",
        "BLOCK_C=64",
    )  # fmt: skip
    assert got.get("ld.global.v4.b32", 0) >= 2, got  # the summed and the gathered tile
    assert not any(k.startswith("ld.global.b16") for k in got), got
    assert got["sass local"] == 0 and got["sass stack"] == 0, got


@pytest.mark.slow
@pytest.mark.parametrize("align", [8, 4])
def test_the_channels_last_transpose_reads_and_writes_vectors(align: int):
    """The NCHW -> channels-last copy in front of the channels-last GEMMs: with its counts
    passed as they were (unspecialized integers) every access was 2 bytes wide and an
    H200 copied at about 1.1 TB/s; rows aligned to 8 elements take 16-byte vectors, to 4
    8-byte ones, and nothing is 2 bytes wide."""
    got = _probe(
        "channels_last_copy._to_channels_last_kernel", "--warps", "4", "--stages", "1", "--const",
        "BIG=False", f"X_ALIGN={align}", "Y_ALIGN=8", f"S_ALIGN={align}", "BLOCK_C=64",
        "BLOCK_S=64",
    )  # fmt: skip
    width = "ld.global.v4.b32" if align == 8 else "ld.global.v2.b32"
    assert got.get(width, 0) > 0 and got.get("st.global.v4.b32", 0) > 0, got
    assert not any(k.endswith(".b16") and n for k, n in got.items()), got


@pytest.mark.slow
def test_the_weight_gradients_position_walk_leaves_the_divisions_out_of_the_lanes():
    """A 128x128x64 step of the channels-last weight gradient divided every lane's
    position by the plane's sizes (45 integer divisions or remainders in its sm_90 code,
    issue slots that outnumber its ``wgmma``'s cycles); walking the positions leaves the
    four of a step's first position and the lanes' offsets, divided once. Both keep their
    16-byte copies and ``wgmma``."""

    def divisions(walk: bool) -> int:
        got = _counts("conv_nhwc_wgrad._nhwc_wgrad_kernel", "ALIGN=8", "EVEN_M=True",
                      "EVEN_N=True", f"WALK={walk}", "BLOCK_K=64")  # fmt: skip
        assert got["cp.async 16-byte (.cg)"] >= 12 and got["wgmma"] > 0, got
        return got.get("div/rem (integer)", 0)

    walked, divided = divisions(True), divisions(False)
    assert walked <= 16 and divided >= 2 * walked, (walked, divided)


@pytest.mark.slow
def test_uneven_channel_tiles_keep_16_byte_copies():
    """Channel counts the tiles do not divide (a weight gradient of 96 or 288 channels a
    side, a forward step of 16 over 36 channels): their channel masks are constant over 8
    channels once the host's alignment proof is restated in the kernel; against the bare
    counts both weight-gradient operands left ``cp.async`` for 2-byte loads."""
    got = _counts("conv_nhwc_wgrad._nhwc_wgrad_kernel", "ALIGN=8", "EVEN_M=False",
                  "EVEN_N=False", "WALK=False", "BLOCK_K=32")  # fmt: skip
    assert got["cp.async 16-byte (.cg)"] >= 12 and got["wgmma"] > 0, got
    assert not any(k.startswith("ld.global") and n for k, n in got.items()), got
    got = _counts("conv_nhwc._nhwc_kernel", "SH=2", "SW=2", "X_ALIGN=8", "EVEN_K=False",
                  "Y_VEC=1", "Y_CVEC=8", "SPLIT=False", "PHASED=True", "FLIP_W=False",
                  "HAS_BIAS=False", "BLOCK_K=16")  # fmt: skip
    assert got["cp.async 16-byte (.cg)"] > 0 and got["wgmma"] > 0, got
    assert not any(k.startswith("ld.global") and n for k, n in got.items()), got
    # a channels-last output: its stores run along the channels, 16 bytes at a time
    assert got.get("st.global.v4.b32", 0) > 0 and got.get("st.global.b16", 0) == 0, got


@pytest.mark.slow
def test_the_split_k_sum_reads_and_writes_vectors():
    """The sum of split-K partials after every split matmul and convolution: one vector
    load a split and one vector store, no divisions, for a dense output."""
    got = _probe("matmul_shared._split_k_sum_kernel", "--warps", "4", "--stages", "1",
                 "--const", "HAS_BIAS=False", "SCALED=False", "BLOCK=1024", "V=8",
                 "DENSE=True")  # fmt: skip
    assert got.get("ld.global.v4.b32", 0) > 0 and got.get("st.global.v4.b32", 0) > 0, got
    scalar = ("ld.global.b16", "ld.global.b32", "st.global.b16", "st.global.b32")
    assert not any(got.get(k, 0) for k in scalar), got
    assert got.get("div/rem (integer)", 0) == 0, got


@pytest.mark.slow
@pytest.mark.parametrize("runs", [1, 4])
def test_batch_norm_planes_of_196_positions_load_and_store_vectors(runs: int):
    """Batch norm over 14x14 NCHW planes (196 positions: Triton's specialization proves
    no divisor but 16): with the host's runs of 4 restated in the kernel (``SV``), the
    planes' tiles load and store 8 bytes at a time; without, 2."""
    got = _probe(
        "batch_norm_planes._bnp_apply_kernel", "--warps", "8", "--stages", "1", "--div16",
        "xsN", "ysN", "--const", "TRAINING=True", "HAS_RUNNING=True", "HAS_SAVE=True",
        "HAS_W=True", "HAS_B=True", "UNIT_S=True", "IDX=tl.int32", "COMPUTE=tl.float32",
        "SPLIT_P2=4", "BLOCK_N=8", "BLOCK_S=256", f"SV={runs}",
    )  # fmt: skip
    vectors = got.get("ld.global.v2.b32", 0) + got.get("st.global.v2.b32", 0)
    assert (vectors >= 4) if runs == 4 else (vectors == 0), got


@pytest.mark.slow
@pytest.mark.parametrize("runs", [False, True])
def test_the_weight_gradients_a_runs_load_as_vectors(runs: bool):
    """The NCHW weight gradient (a 7x7 stride-2 stem, flat columns): with ``A_RUNS`` its
    grad_output tile loads 16 bytes at a time; without, 2 (B is a gather either way)."""
    got = _probe(
        "conv_kernels._wgrad_kernel", "--warps", "4", "--stages", "1", "--const", "KD=1",
        "KH=7", "KW=7", "SD=1", "SH=2", "SW=2", "HAS_D=False", "IEEE=False", "TO_F32=False",
        "BIG=False", "B_POS_MAJOR=True", "VEC_A=8", "VEC_P=1", "FLAT_TAPS=True",
        f"A_RUNS={runs}", "BLOCK_M=64", "BLOCK_N=64", "BLOCK_K=64",
    )  # fmt: skip
    assert (got.get("ld.global.v4.b32", 0) > 0) == runs, got


@pytest.mark.slow
@pytest.mark.parametrize("cv", [8, 1])
def test_batch_norm_rows_load_and_store_channel_vectors(cv: int):
    """Batch norm's row kernels (channels-last and 2-D inputs): with ``CV`` 8 (the host
    found the channels adjacent and the counts and row strides multiples of 8) the
    forward's apply and the backward's reduce and apply read their tiles 16 bytes at a
    time, and both applies store them so; with ``CV`` 1 (``BN_ROW_VECTORS`` off, as the
    survey found them) every tile access is 2 bytes wide."""
    tile = ["--warps", "8", "--stages", "1", "--const", "MERGED=True", f"CV={cv}",
            "COMPUTE=tl.float32", "BLOCK_R=64", "BLOCK_C=64"]  # fmt: skip
    flags = ["TRAINING=True", "HAS_W=True", "FOLD=False", "BLOCK_S=1"]
    runs = {
        "batch_norm._bn_apply_kernel": [*flags, "HAS_RUNNING=False", "HAS_SAVE=False",
                                        "HAS_B=True"],
        "batch_norm_backward._bn_bwd_reduce_kernel": [],
        "batch_norm_backward._bn_bwd_apply_kernel": [*flags, "RUNNING=False", "DW=False",
                                                     "DB=False"],
    }  # fmt: skip
    for kernel, extra in runs.items():
        got = _probe(kernel, *tile, *extra)
        vectors = got.get("ld.global.v4.b32", 0)
        assert (vectors >= 4) if cv == 8 else (vectors == 0), (kernel, got)
        if "reduce" not in kernel:
            stored = got.get("st.global.v4.b32", 0)
            assert (stored >= 2 and got.get("st.global.b16", 0) == 0) if cv == 8 else stored == 0, (
                kernel, got)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("align", [4, 2])
def test_rows_aligned_to_fewer_than_8_channels_still_copy_asynchronously(align: int):
    """Channel counts no multiple of 8 (36 or 52 a group: rows 8 bytes apart; 18: 4 bytes):
    restated to ``X_ALIGN``/``ALIGN`` of 4 or 2, the activation of a phased input gradient
    (masked 64-channel steps) and both operands of a weight gradient load through 8- or
    4-byte ``cp.async`` into ``wgmma``; at 1 they were 2-byte synchronous loads (32 and 64
    ``ld.global.b16`` a step)."""
    got = _counts("conv_nhwc._nhwc_kernel", "SH=2", "SW=2", f"X_ALIGN={align}", "EVEN_K=False",
                  "Y_VEC=1", "Y_CVEC=1", "SPLIT=False", "PHASED=True", "FLIP_W=False",
                  "HAS_BIAS=False", "BLOCK_K=64")  # fmt: skip
    assert got["cp.async (.ca)"] > 0 and got["wgmma"] > 0, got
    assert not any(k.startswith("ld.global") and n for k, n in got.items()), got
    got = _counts("conv_nhwc_wgrad._nhwc_wgrad_kernel", f"ALIGN={align}", "EVEN_M=False",
                  "EVEN_N=False", "WALK=True", "BLOCK_K=64")  # fmt: skip
    assert got["cp.async (.ca)"] > 0 and got["wgmma"] > 0, got
    assert not any(k.startswith("ld.global") and n for k, n in got.items()), got


def _cl_walk(align: int, stages: int, *, counts_proven: bool = True,
             warps: int | None = None) -> dict[str, int]:  # fmt: skip
    """The channels-last depthwise forward walk at its default tile and ConvNeXt's 7x7
    kernel; ``counts_proven``: the count and strides passed as multiples of 16 (Triton
    proves their alignment), else as CoaT's 24 channels are (it proves nothing);
    ``warps``: the default's (None) or these."""
    from opbench.kernels._lib import conv_depthwise_cl_rows as m

    div16 = ["--div16", "C", "xs0", "xs3", "xs4", "ys0", "ys3", "ys4"] if counts_proven else []
    return _probe(
        "conv_depthwise_cl_rows._dw_cl_rows_kernel", "--warps", str(warps or m.DW_CL_ROWS_WARPS),
        "--stages", "1", "--sass", *div16, "--const", "KH=7", "KW=7", "FLIP=False",
        "HAS_BIAS=True", "BIG=False", f"BLOCK_W={m.DW_CL_ROWS_BLOCK_W}",
        f"BLOCK_C={m.DW_CL_ROWS_BLOCK_C}", f"ALIGN={align}", f"STAGES={stages}",
    )  # fmt: skip


def _cl_walk_wgrad(block_w: int, block_c: int, align: int, stages: int, *,
                   counts_proven: bool = True) -> dict[str, int]:  # fmt: skip
    """The channels-last depthwise weight-gradient walk on its default warps, 7 taps a
    kernel row, over a ``[block_w, block_c]`` tile; ``counts_proven`` as for
    :func:`_cl_walk`."""
    from opbench.kernels._lib import conv_depthwise_wgrad_cl_walk as m

    div16 = ["--div16", "C", "as0", "as3", "as4", "bs0", "bs3", "bs4"] if counts_proven else []
    return _probe(
        "conv_depthwise_wgrad_cl_walk._dwg_cl_walk_kernel", "--warps",
        str(m.DWG_CL_WALK_WARPS), "--stages", "3",
        "--sass", *div16, "--const", "KW=7", "BIG=False", f"BLOCK_W={block_w}",
        f"BLOCK_C={block_c}", f"ALIGN={align}", f"STAGES={stages}",
    )  # fmt: skip


@pytest.mark.slow
def test_the_channels_last_depthwise_walk_keeps_its_7x7_weights_without_spilling():
    """The channels-last depthwise walk's 16 columns x 32 channels on 8 warps and
    ConvNeXt's 7x7 kernel: the compiler keeps the 49 taps' weights in registers across the
    walk, so a larger share of the tile a thread spills; here no local memory and no
    stack, 7 input loads a step and the 49 weights loaded once, before it. (The default
    is 4 warps since the H200 timed them faster on every 7x7 row, spill and all:
    ``DW_CL_ROWS_WARPS``; 8 is the setting ``conv_pending.sh`` times against it.)"""
    got = _cl_walk(align=1, stages=1, warps=8)
    assert got["sass local"] == 0 and got["sass stack"] == 0, got
    assert got["sass LDG"] == 7 + 49 + 1, got  # the bias once
    assert not any(k.startswith("ld.global.b16") for k in got), got


@pytest.mark.slow
def test_the_channels_last_depthwise_walk_pipelines_its_rows_and_not_its_taps():
    """``DW_CL_ROWS_STAGES=3``: the walk's 7 row loads a step become ``cp.async`` copies
    three rows deep (21), while its 49 taps, loaded once before the loop, stay plain
    loads into registers (pipelined with the rows they would be copied again every step);
    nothing spills on 8 warps (4, the default, spill 120 bytes: the first test's note)."""
    got = _cl_walk(align=8, stages=3, warps=8)
    assert got["cp.async (.ca)"] + got["cp.async 16-byte (.cg)"] == 7 * 3, got
    assert got["sass LDG"] == 49 + 1, got  # the taps and the bias
    assert got["sass local"] == 0 and got["sass stack"] == 0, got


@pytest.mark.slow
@pytest.mark.parametrize("align", [1, 8])
def test_the_channels_last_depthwise_walk_reads_channel_runs_as_vectors(align: int):
    """The walk over 24 channels (CoaT's: no multiple of 16, so Triton proves nothing of
    the count or the strides): told nothing (``ALIGN=1``) every access is 2 bytes wide;
    restated as runs of 8 (``DW_CL_ROWS_ALIGN_RUNS``) the channel loads and the store are
    as wide as for 16 channels' multiples, with no spill on 8 warps."""
    got = _cl_walk(align=align, stages=1, counts_proven=False, warps=8)
    narrow = sum(n for k, n in got.items() if k.endswith(".b16") and k.startswith(("ld", "st")))
    assert got["sass local"] == 0 and got["sass stack"] == 0, got
    if align == 1:
        assert narrow > 0, got
    else:
        assert narrow == 0 and got.get("ld.global.b32", 0) >= 7 + 49, got


@pytest.mark.slow
def test_the_channels_last_depthwise_weight_gradient_walk_loads_16_byte_rows():
    """The channels-last depthwise weight gradient's row walk at its default tile (16
    columns x 64 channels, 4 warps), 7 taps a kernel row: a step is the summed row and
    the 7 column shifts of the gathered one, 8 loads of 16-byte runs, nothing spilled."""
    from opbench.kernels._lib import conv_depthwise_wgrad_cl_walk as m

    got = _cl_walk_wgrad(16, m.DWG_CL_WALK_BLOCK_C, align=1, stages=1)
    assert got.get("ld.global.v4.b32", 0) == 8 and got["sass LDG"] == 8, got
    assert got["sass local"] == 0 and got["sass stack"] == 0, got


@pytest.mark.slow
@pytest.mark.parametrize("align", [1, 8])
def test_the_channels_last_depthwise_weight_gradient_walk_reads_channel_runs(align: int):
    """The weight-gradient walk over a 56-wide row of 24 channels (CoaT's: 64 x 32 tiles,
    Triton told nothing of the count or strides): 2-byte loads at ``ALIGN=1`` (and 2.5 KB
    of stack, Triton 3.9); restated as runs of 8 (``DWG_CL_WALK_ALIGN_RUNS``), a step's 8
    tiles load as 16-byte vectors and nothing spills."""
    got = _cl_walk_wgrad(64, 32, align=align, stages=1, counts_proven=False)
    if align == 1:
        assert got.get("ld.global.b16", 0) > 0, got
    else:
        assert got.get("ld.global.v4.b32", 0) == 16 and not got.get("ld.global.b16"), got
        assert got["sass local"] == 0 and got["sass stack"] == 0, got


@pytest.mark.slow
@pytest.mark.parametrize("stages", [2, 3])
def test_the_channels_last_depthwise_weight_gradient_walk_pipelines_its_rows(stages: int):
    """``DWG_CL_WALK_STAGES``: the weight-gradient walk's 8 tile loads a step (the summed
    row and 7 shifts of the gathered one) become 16-byte ``cp.async`` copies ``stages``
    rows deep, where a plain loop waits on each row's loads; nothing spills."""
    got = _cl_walk_wgrad(16, 64, align=8, stages=stages)
    assert got["cp.async 16-byte (.cg)"] == 8 * stages, got
    assert got["sass local"] == 0 and got["sass stack"] == 0, got
