"""The rules a trial's raw data is held to, as plain functions of the worker's records.

Owns the predicates the checks (:mod:`opbench.judge.checks`) apply to one trial: which
inputs the kernel wrote (:func:`mutations`, against the harness's own copies), whether
its outputs alias as the op's contract says (:func:`alias_problem`) and keep the layout
in-place and ``out=`` variants must keep (:func:`stride_problem`), how its values are
compared (:func:`compare_kwargs`, :func:`compare_to_expected`, :func:`compare_written`),
and the determinism rule: two runs' outputs compared bitwise (:func:`defined_equal`), and
which operators PyTorch documents as nondeterministic (:data:`CUDA_NONDETERMINISTIC`,
:data:`CPU_NONDETERMINISTIC`, :func:`documented_nondeterministic`).
"""

from __future__ import annotations

from typing import Any

import torch

from opbench.instrument.records import TrialResult
from opbench.judge import correctness as corr
from opbench.judge.expectations import Expected, is_random, storages_of, with_aliases
from opbench.spec.call import UNINITIALIZED_OPS
from opbench.spec.judge_options import JudgeOptions
from opbench.suites.case import Case

__all__ = [
    "CPU_NONDETERMINISTIC",
    "CUDA_NONDETERMINISTIC",
    "alias_problem",
    "compare_kwargs",
    "compare_to_expected",
    "compare_written",
    "defined_equal",
    "diff_summary",
    "documented_nondeterministic",
    "eager_unreliable",
    "mutations",
    "stride_problem",
    "top_arg",
    "trial_label",
]

#: Ops PyTorch documents as nondeterministic on CUDA (``torch.use_deterministic_algorithms``).
CUDA_NONDETERMINISTIC: frozenset[str] = frozenset(
    """
    index_add index_put _index_put_impl put scatter_add scatter_reduce scatter index_copy
    index_reduce embedding_dense_backward _embedding_bag _embedding_bag_backward
    _embedding_bag_dense_backward _embedding_bag_per_sample_weights_backward embedding_bag
    avg_pool3d_backward adaptive_avg_pool2d_backward _adaptive_avg_pool2d_backward
    adaptive_avg_pool3d_backward _adaptive_avg_pool3d_backward adaptive_max_pool2d_backward
    adaptive_max_pool3d_backward fractional_max_pool2d_backward fractional_max_pool3d_backward
    max_pool3d_with_indices_backward max_unpool1d max_unpool2d max_unpool3d
    upsample_linear1d_backward upsample_bilinear2d_backward upsample_bicubic2d_backward
    upsample_trilinear3d_backward _upsample_bilinear2d_aa_backward
    reflection_pad1d_backward reflection_pad2d_backward reflection_pad3d_backward
    replication_pad1d_backward replication_pad2d_backward replication_pad3d_backward
    nll_loss2d_forward nll_loss2d_backward _ctc_loss_backward ctc_loss histc bincount
    kthvalue median nanmedian grid_sampler_2d_backward grid_sampler_3d_backward cumsum
    _segment_reduce_backward segment_reduce
    """.split()
) | frozenset(
    # cuDNN's convolutions: PyTorch makes them deterministic only under
    # ``torch.backends.cudnn.deterministic`` (set by ``use_deterministic_algorithms``), which
    # no worker sets. Measured: aten's own convolution.default, run twice on identical
    # inputs in one worker, differed by up to 1.2e-04 in the quick OpInfo profile on a
    # 4 x H100 and a 4 x H200 host (2026-11-27), while the harness's two eager runs agreed,
    # so the judge failed PyTorch itself as ``nondeterministic``.
    """
    convolution _convolution convolution_backward cudnn_convolution
    cudnn_convolution_transpose cudnn_convolution_relu cudnn_convolution_add_relu
    """.split()
)


#: Ops measured to be bitwise nondeterministic in eager PyTorch on CPU (multi-threaded
#: LAPACK): ``linalg_lstsq`` (gelsy driver) differs in the last bits from run to run.
CPU_NONDETERMINISTIC: frozenset[str] = frozenset({"linalg_lstsq"})


# --------------------------------------------------------------------------- determinism


def defined_equal(
    overload: torch._ops.OpOverload, a: Any, b: Any, undefined: frozenset[str]
) -> bool:
    """Bitwise equality of two runs' outputs, ignoring outputs whose values are undefined
    (``undefined``: their paths, from :func:`undefined_outputs`)."""
    base = overload._schema.name.removeprefix("aten::")
    if base in UNINITIALIZED_OPS:
        return True
    if not undefined:
        return corr.bitwise_equal(a, b)
    la, lb = corr.leaves(a), corr.leaves(b)
    return len(la) == len(lb) and all(
        p in undefined or corr.bitwise_equal(x, y) for (p, x), (_, y) in zip(la, lb)
    )


def diff_summary(a: Any, b: Any) -> str:
    la, lb = corr.leaves(a), corr.leaves(b)
    for (p, x), (_, y) in zip(la, lb):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape:
            if not corr.bitwise_equal(x, y):
                if x.dtype.is_floating_point and x.numel():
                    d = (x.double() - y.double()).abs()
                    d = d[torch.isfinite(d)]
                    m = float(d.max()) if d.numel() else float("nan")
                    return (
                        f"output{p} differs between two runs on identical inputs (max diff {m:.3g})"
                    )
                return f"output{p} differs between two runs on identical inputs"
    return "outputs differ between two runs on identical inputs"


def documented_nondeterministic(op: str, overload: torch._ops.OpOverload, device: str) -> bool:
    if is_random(overload) or torch.Tag.nondeterministic_bitwise in overload.tags:
        return True
    if op.split(".", 1)[0].rstrip("_") in CPU_NONDETERMINISTIC:
        return True
    if str(device).startswith("cuda"):
        base = op.split(".", 1)[0]
        return base.rstrip("_") in CUDA_NONDETERMINISTIC or base in CUDA_NONDETERMINISTIC
    return False


# --------------------------------------------------------------------------- values


def compare_kwargs(case: Case, options: JudgeOptions, exp: Expected) -> dict[str, Any]:
    """The correctness rule's settings for one case (tolerance scales, the op's name), and
    where to compare: on the GPU the harness computed eager and the reference on. On the
    CPU the comparisons of large outputs were most of a GPU run's wall time: the traced
    ``_log_softmax_backward_data`` of [1024, 50265] took 42 s in the harness against 16 s
    in the worker (H100 host, traces run, 76 tests: 283 s wall, 111 s in workers)."""
    return dict(
        op=case.op,
        rtol_scale=options.rtol_scale,
        atol_scale=options.atol_scale,
        max_in_numel=exp.max_in_numel,
        work_device=exp.device if exp.device.startswith("cuda") else None,
    )


def compare_to_expected(
    exp: Expected,
    outputs: Any,
    output_meta: list[dict[str, Any]],
    cmp_kw: dict[str, Any],
    *,
    meta_only: frozenset[str] | set[str] | bool,
) -> corr.Comparison:
    """A candidate's outputs (as a worker sent them) against the harness's eager and
    float64 outputs for the same seed, under :func:`compare_kwargs`' settings."""
    res = corr.compare_outputs(
        outputs,
        exp.eager,
        exp.ref,
        cand_devices=corr.devices_from_meta(output_meta),
        eager_devices={m["path"]: m["device"] for m in exp.eager_meta if "device" in m},
        meta_only=meta_only,
        **cmp_kw,
    )
    if cmp_kw.get("work_device"):
        # the worker timing the next test shares this GPU: hand back the blocks the
        # comparison's float32/float64 copies took
        torch.cuda.empty_cache()
    return res


def compare_written(tr: TrialResult, exp: Expected, cmp_kw: dict[str, Any]) -> corr.Comparison:
    """Arguments the op writes besides its outputs (running statistics) must match eager."""
    for path, eager_val in exp.eager_written.items():
        cand_val = tr.written_after.get(path)
        if not isinstance(cand_val, torch.Tensor):
            return corr.Comparison(
                "wrong_result", f"the worker did not report written argument {path}"
            )
        ref_val = exp.ref_written.get(path)
        res = corr.compare_tensor(cand_val, eager_val, ref_val, path="", **cmp_kw)
        if not res.ok:
            res.message = f"written argument {path}: " + res.message.removeprefix("output: ")
            return res
    return corr.Comparison()


def eager_unreliable(details: dict[str, Any] | None) -> str | None:
    """The reason eager PyTorch cannot judge this output, if a comparison found one."""
    if not details:
        return None
    if isinstance(details.get("eager_unreliable"), str):
        return details["eager_unreliable"]
    for v in details.values():  # per-output details of a structured comparison
        if isinstance(v, dict) and isinstance(v.get("eager_unreliable"), str):
            return v["eager_unreliable"]
    return None


# --------------------------------------------------------------------------- inputs and outputs


def trial_label(idx: int, tr: TrialResult) -> str:
    if idx == 0:
        return ""
    return f"trial {idx + 1} (seed {tr.seed}{', re-drawn' if tr.redraw else ''}): "


def top_arg(path: str) -> str:
    """``args[1][0]`` -> ``1``; ``kwargs['out']`` -> ``out``."""
    return path.split("]", 1)[0].removeprefix("args[").removeprefix("kwargs[").strip("'\"")


def mutations(tr: TrialResult, exp: Expected) -> dict[str, int]:
    """Inputs whose storage differs after the call from the harness's own copy made
    before it: path -> elements changed (-1: the layout changed; 1 at least, when only
    digests could be compared)."""
    changed: dict[str, int] = {}
    for p, m in exp.inputs.items():
        after = tr.input_meta_after.get(p)
        if after is None or after.get("unreadable"):
            changed[p] = -1
            continue
        if after.get("shape") != m["shape"] or after.get("stride") != m["stride"]:
            changed[p] = -1
            continue
        same_span = tr.inputs_digest.get(p) == tr.inputs_digest_before.get(p)
        same_elements = tr.elements_digest.get(p) == exp.element_digests.get(p)
        if same_span and same_elements:
            continue  # its storage as before the call, its elements as the harness built them
        before, now = exp.input_spans.get(p), tr.inputs_after.get(p)
        changed[p] = 1
        if (
            isinstance(before, torch.Tensor)
            and isinstance(now, torch.Tensor)
            and now.shape == before.shape
            and now.dtype == before.dtype
        ):
            if before.dtype.is_floating_point or before.dtype.is_complex:
                diff = ~((before == now) | (torch.isnan(before) & torch.isnan(now)))
            else:
                diff = before != now
            changed[p] = max(1, int(diff.sum()))
    return changed


def _returned_targets(tr: TrialResult) -> list[bool]:
    """For each ``self``/``out`` target: did the kernel return that very object (by the
    Python object ids the worker recorded), in its place among the outputs?"""
    leaves = tr.output_meta
    out = []
    for i, t in enumerate(tr.target_meta):
        if not t or "obj_id" not in t:
            out.append(False)
            continue
        out.append(i < len(leaves) and leaves[i].get("obj_id") == t["obj_id"])
    return out


def _target_moved(tr: TrialResult) -> bool:
    """Whether an in-place kernel swapped ``self``'s storage for a new one."""
    for before, after in zip(tr.target_meta, tr.target_after):
        if not before or not after or not before.get("storage_ptr"):
            continue
        if after.get("storage_ptr") != before["storage_ptr"]:
            return True
    return False


def alias_problem(
    op: str, kind: str, tr: TrialResult, exp: Expected, returns_alias: bool
) -> str | None:
    """Why the outputs alias wrongly, or None."""
    if kind in ("inplace", "out"):
        what = "self" if kind == "inplace" else "out"
        returned = _returned_targets(tr)
        if not returned or not all(returned):
            return (
                f"{op} must return its {what} tensor (the same object); "
                "the kernel returned another object"
            )
        if kind == "inplace" and _target_moved(tr):
            return "the in-place kernel moved self to new storage instead of writing it"
        return None
    if returns_alias:
        return None
    eager_aliasing = {m["path"] for m in exp.eager_meta if m.get("aliases_input")}
    storages = storages_of(tr.input_meta)
    for m in with_aliases([dict(m) for m in tr.output_meta], storages):
        if m.get("aliases_input") and m["path"] not in eager_aliasing:
            return (
                f"output{m['path']} shares storage with input {m['aliases_input']}; "
                f"{op} returns a new tensor"
            )
    return None


def stride_problem(kind: str, tr: TrialResult, exp: Expected) -> str | None:
    """In-place and out= results must keep the layout eager gives (self's / out's own)."""
    eager_by_path = {m["path"]: m for m in exp.eager_meta if m.get("kind") == "tensor"}
    for m in tr.output_meta:
        e = eager_by_path.get(m["path"])
        if e is None or m.get("kind") != "tensor" or not m.get("shape"):
            continue
        if m.get("shape") == e.get("shape") and m.get("stride") != e.get("stride"):
            if any(s > 1 for s in m["shape"]) or m.get("storage_offset") != e.get("storage_offset"):
                return (
                    f"output{m['path']} has strides {m.get('stride')}, but "
                    f"{'self' if kind == 'inplace' else 'out'} must keep {e.get('stride')} "
                    "(as eager does)"
                )
    return None
