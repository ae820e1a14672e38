"""Where the reference backend's convolutions stand on each half of the traces, by the
path that serves each row: the tuning half beside the held-out half (issue #36), so a
rule or tile that only fits the rows it was picked on shows, and which path loses on
shapes it was never tuned on.

On an H100 the backend read 1.10x eager on the part-2 rows it was tuned on and 0.32x
(forward) / 0.43x (backward) on the TorchBench models' own rows (2026-11-27); the partial
held-out run: forward 0.844, backward 0.284 (``results/triton-heldout-h100-partial.md``).
That says *that* it loses, not *where*: the backend chooses among a pointwise path (the
matmul kernel), a direct depthwise kernel, a flattened small-reduction kernel, the implicit
GEMM and, for the weight gradient, its own implicit GEMM. This script runs each traced row
once to record which launchers served it (:func:`served_by`), checks the result against
eager, then times eager (cuDNN) and the backend's kernel; it reports per half, operator and
path. Nothing here is picked or written.

Rows: ``convolution.default`` and ``convolution_backward.default`` of the traces, the
tuning half through :func:`opbench.suites.trace_split.without_heldout` and the held-out
half through ``select(..., "heldout")``, distinct argument lists weighted by their counts,
the ``--limit`` most used of each half and operator. ``--strided`` keeps the rows of a stride above 1
(the judged run's two rows a op hold none), ``--match`` those whose argument text matches.

Timing: ``triton.testing.do_bench`` (L2 cleared before each repetition, median) on CUDA;
on the CPU (``TRITON_INTERPRET=1``, a correctness smoke test) nothing is timed.

Usage (on the GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/conv_heldout.py --traces .gpu_data/traces --limit 40 \\
        --out benchmarks/results/conv-heldout-h100
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "common"))
from kernel_times import kernel_times_us  # noqa: E402

from opbench.report.means import geomean  # noqa: E402

OPS = ("convolution.default", "convolution_backward.default")
HALVES = ("tuning", "heldout")
#: The launchers a convolution can end in, by the name ``conv`` (or ``conv_pointwise``)
#: calls them under, and the path each stands for.
PATHS = {
    ("conv", "pointwise_forward"): "pointwise (matmul kernel)",
    ("conv_backward", "pointwise_weight_grad"): "pointwise weight grad (matmul kernel)",
    ("conv", "_depthwise"): "depthwise (direct)",
    ("conv", "_dw_rows"): "depthwise (row walk)",
    ("conv", "_smallk"): "small reduction (flattened)",
    ("conv", "_conv"): "implicit GEMM",
    ("conv_nhwc", "_nhwc"): "implicit GEMM (channels-last)",
    ("conv_nhwc_wgrad", "_nhwc_wgrad"): "weight grad (channels-last)",
    ("conv_backward", "_wgrad"): "weight grad (implicit GEMM)",
    ("conv_depthwise_wgrad", "_dwg"): "depthwise weight grad (direct)",
    ("conv_depthwise_wgrad_rows", "_dwg_rows"): "depthwise weight grad (tap rows)",
    ("conv_depthwise_wgrad", "_dwg_plane"): "depthwise weight grad (plane)",
    ("conv_depthwise_wgrad_dot", "_dwg_dot"): "depthwise weight grad (tensor cores)",
    ("conv_depthwise_wgrad_walk", "_dwg_walk"): "depthwise weight grad (row walk)",
    ("conv", "_dw_cl_rows"): "depthwise channels-last (row walk)",
    ("conv_depthwise_wgrad_cl_walk", "_dwg_cl_walk"): "depthwise weight grad (channels-last walk)",
}


#: Launchers that are no path of their own but whose launches tell a variant's rows apart
#: (:func:`served_by` records them with the paths' launches): a variant that copies a
#: tensor to channels-last once where the defaults copy it twice launches the same paths
#: (``NHWC_SHARE_COPIES``: its A/B of 2026-12-02 read every row "unchanged" for that).
COUNTED = {("channels_last_copy", "_to_channels_last"): "channels-last copy"}


#: Where each operator's ``stride`` argument sits (forward: input, weight, bias, stride;
#: backward: grad_output, input, weight, bias_sizes, stride).
STRIDE_ARG = {"convolution.default": 3, "convolution_backward.default": 4}


def strided(op: str, args: str) -> bool:
    """Whether a row's convolution strides by more than 1 in some dimension: its input
    gradient is a strided transposed convolution (the phased GEMM's rows), and its weight
    gradient gathers the input at a stride. 177 tuning and 146 held-out backward rows are
    strided, and the judged run's two most used rows a op hold none (2026-12-01)."""
    from opbench.spec.args import parse_args

    stride = parse_args(args).args[STRIDE_ARG[op]]
    return isinstance(stride, (list, tuple)) and any(int(s) > 1 for s in stride)


def with_batch(op: str, args: str, n: int) -> str:
    """``args`` (a convolution row's argument text) with ``n`` images: the first size of
    its activations (the input; for the backward grad_output and input too) replaced, the
    weight's left alone. Strides stay: no stride of a contiguous or channels-last tensor
    depends on its first size."""
    import re

    count = 2 if op.startswith("convolution_backward") else 1
    return re.sub(r"T\(\[\d+,", f"T([{n},", args, count=count)


def with_channels_last(op: str, args: str) -> str:
    """``args`` with its activations (the input; for the backward grad_output and input
    too) dense channels-last where their channels are not innermost already: the strides
    ``torch.channels_last`` gives (1-D: channels innermost by a permutation, as traced).
    Why: the channels-last kernels' settings (the depthwise walks') are decided on the
    tuning half, whose channels-last depthwise rows are four 3x3 ones (Twins'), while the
    held-out half has 7x7 and 5x5 ones (ConvNeXt's, CoaT's); its NCHW rows of every
    kernel size, rewritten, are the tuning half's shapes in the layout those kernels read."""
    import re

    count = 2 if op.startswith("convolution_backward") else 1
    tensor = re.compile(r"T\(\[([\d, ]+)\], (\w+)(?:, stride=\(([\d, ]+)\))?\)")

    def rewrite(m: re.Match) -> str:
        sizes = [int(x) for x in m.group(1).split(",")]
        stride = [int(x) for x in m.group(3).split(",")] if m.group(3) else None
        if len(sizes) < 3 or (stride is not None and stride[1] == 1):
            return m.group(0)
        n, c, *space = sizes
        inner, strides = c, []
        for size in reversed(space):
            strides.insert(0, inner)
            inner *= size
        cl = (inner, 1, *strides)
        return f"T([{m.group(1)}], {m.group(2)}, stride=({', '.join(map(str, cl))}))"

    return tensor.sub(rewrite, args, count=count)


def rows(
    traces: str, half: str, limit: int | None, ops: tuple[str, ...] = OPS, match: str | None = None,
    only_strided: bool = False, batch: int | None = None, channels_last: bool = False,
) -> list[dict[str, Any]]:  # fmt: skip
    """The ``limit`` most used distinct convolution rows of ``half`` per operator of
    ``ops``, those whose argument text matches the regular expression ``match`` if given
    (``'T\\(\\[\\d+, 1, \\d+'``: a weight or input of one channel a group, the
    depthwise rows), and with ``only_strided`` those of a stride above 1 (:func:`strided`).
    ``batch``: each row rewritten to that many images first (:func:`with_batch`; rows
    that become alike merge): a grid rule for the held-out half's one-image rows is then
    decided on the tuning half's shapes at one image, not on the rows it is judged on.
    ``channels_last``: each row's activations made channels-last after ``match`` chose it
    (:func:`with_channels_last`; rows that become alike merge)."""
    import re

    from opbench.suites.trace_files import load_traces
    from opbench.suites.trace_split import select, without_heldout

    entries = load_traces(traces)
    chosen = without_heldout(entries) if half == "tuning" else select(entries, "heldout")
    weights: dict[tuple[str, str], int] = defaultdict(int)
    for e in chosen:
        if e.op in ops and (match is None or re.search(match, e.args)):
            if not only_strided or strided(e.op, e.args):
                a = e.args if batch is None else with_batch(e.op, e.args, batch)
                a = with_channels_last(e.op, a) if channels_last else a
                weights[(e.op, a)] += max(e.count, 1)
    out: list[dict[str, Any]] = []
    for op in ops:
        mine = sorted(((w, a) for (o, a), w in weights.items() if o == op), reverse=True)
        out += [{"half": half, "op": op, "args": a, "weight": w} for w, a in mine[:limit]]
    return out


@contextlib.contextmanager
def served_by(paths: list[str], launches: list[tuple[Any, ...]] | None = None) -> Iterator[None]:
    """Inside the block, every launcher of :data:`PATHS` that serves a call appends its
    path to ``paths`` and, given ``launches``, its launch there (:func:`launch_key`),
    and runs as before; those of :data:`COUNTED` note their launches only."""
    import importlib

    saved: list[tuple[Any, str, Any]] = []
    for table, noted in ((PATHS, paths), (COUNTED, [])):
        for (module, name), label in table.items():
            mod = importlib.import_module(f"opbench.kernels._lib.{module}")
            real = getattr(mod, name)
            saved.append((mod, name, real))
            setattr(mod, name, _Recorder(real, label, noted, launches))
    try:
        yield
    finally:
        for mod, name, real in saved:
            setattr(mod, name, real)


def launch_key(label: str, a: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, ...]:
    """What tells two launches apart for a variant: the path, the grid (``conv``'s
    launchers take it first) and the scalar keyword arguments (tiles, warps, flags);
    tensors and other objects by their type alone."""

    def plain(v: Any) -> Any:
        if isinstance(v, (bool, int, float, str, type(None))):
            return v
        if isinstance(v, tuple) and all(isinstance(x, int) for x in v):
            return v
        return type(v).__name__

    grid = plain(a[0]) if a else None
    return (label, grid, tuple(sorted((k, plain(v)) for k, v in kw.items())))


class _Recorder:
    """A launcher (``conv``'s are called with their grid first) that notes its path and,
    given a list, its launch (:func:`launch_key`)."""

    def __init__(self, real: Any, label: str, paths: list[str],
                 launches: list[tuple[Any, ...]] | None = None) -> None:  # fmt: skip
        self._real, self._label, self._paths, self._launches = real, label, paths, launches

    def __call__(self, *a: Any, **kw: Any) -> Any:
        self._paths.append(self._label)
        if self._launches is not None:
            self._launches.append(launch_key(self._label, a, kw))
        return self._real(*a, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _close(got: Any, want: Any) -> bool:
    """The same bound as the matmul tuner's (fp32 accumulation on both sides; scaled by
    the output's magnitude)."""
    import torch

    if got is None or want is None:
        return got is None and want is None
    want = want.float()
    scale = float(want.abs().max()) if want.numel() else 0.0
    return bool(torch.allclose(got.float(), want, rtol=2e-2, atol=2e-2 * max(scale, 1.0)))


def _agrees(got: Any, want: Any) -> bool:
    if isinstance(want, (tuple, list)):
        return len(got) == len(want) and all(_close(g, w) for g, w in zip(got, want))
    return _close(got, want)


def measure(
    row: dict[str, Any], device: str, variants: dict[str, list[str]] | None = None,
    paths: str | None = None, profile: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The row's path, whether it agrees with eager, and (on CUDA) both sides' ms; under
    each of ``variants`` (name -> ``MODULE.NAME=VALUE`` settings, restored after) the
    backend's path, agreement and ms again, beside the same eager time. A row whose
    path does not match the regular expression ``paths`` is returned with
    ``skipped`` set, untimed. ``profile``: each side's kernels and their mean device
    microseconds a call (``kernels_us``, ``eager_kernels_us``), where copies and packing
    show, and ``device_speedup``, eager's kernel time over the backend's: the device
    alone, where ``speedup`` (``do_bench`` around each call) also holds the gaps a
    slow host leaves between kernels."""
    import re

    import torch

    from opbench.kernels._lib import conv, conv_backward
    from opbench.spec.args import parse_args
    from opbench.suites.inputs import make_inputs

    op = row["op"]
    call, kw = make_inputs(op, parse_args(row["args"]), device, 0)
    eager = getattr(torch.ops.aten, op.split(".")[0]).default
    want = eager(*call, **kw)
    timed = device.startswith("cuda")

    def bench(fn: Any) -> float:
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median"))

    def backend() -> dict[str, Any]:
        mine = (
            conv.convolution if op == "convolution.default" else conv_backward.convolution_backward
        )
        used: list[str] = []
        launched: list[tuple[Any, ...]] = []
        try:
            with served_by(used, launched):
                got = mine(*call, **kw)
        except NotImplementedError as e:  # the backend declines it: PyTorch serves it
            return {"path": "declined", "detail": str(e)[:200]}
        got_row = {"path": " + ".join(dict.fromkeys(used)) or "none",
                   "correct": _agrees(got, want), "launches": launched}  # fmt: skip
        if timed and got_row["correct"]:
            got_row["backend_ms"] = bench(lambda: mine(*call, **kw))
            if profile:
                got_row["kernels_us"] = _kernel_times(lambda: mine(*call, **kw))
        return got_row

    def device_speedup(got_row: dict[str, Any]) -> None:
        ours = sum(got_row.get("kernels_us", {}).values())
        if ours and "eager_kernels_us" in out:
            got_row["device_speedup"] = sum(out["eager_kernels_us"].values()) / ours

    out = dict(row)
    first = backend()
    if paths is not None and not re.search(paths, first["path"]):
        return dict(out, path=first["path"], skipped=True)
    out.update(first)
    if timed and "backend_ms" in out:
        out["eager_ms"] = bench(lambda: eager(*call, **kw))
        out["speedup"] = out["eager_ms"] / out["backend_ms"]
        if profile:  # device time alone: the kernels' sums, host gaps left out
            out["eager_kernels_us"] = _kernel_times(lambda: eager(*call, **kw))
            device_speedup(out)
    for name, settings in (variants or {}).items():
        with _overridden(settings):
            v = backend()
        # a variant that launches what the defaults launched is this row's noise control
        v["changed"] = v.pop("launches", None) != out.get("launches")
        if "backend_ms" in v and "eager_ms" in out:
            v["speedup"] = out["eager_ms"] / v["backend_ms"]
            device_speedup(v)
        out.setdefault("variants", {})[name] = v
    out.pop("launches", None)
    return out


def _kernel_times(fn: Any, calls: int = 20) -> dict[str, float]:
    """Mean device microseconds a call of each kernel ``fn`` launches (torch.profiler);
    empty where the profiler fails (the row keeps its ``do_bench`` times)."""
    try:
        return {k: round(v, 1) for k, v in kernel_times_us(fn, calls).items()}
    except Exception as e:  # noqa: BLE001 - a probe's extra column, never the row
        print(f"profiler failed: {type(e).__name__}: {e}", flush=True)
        return {}


@contextlib.contextmanager
def _overridden(settings: list[str]) -> Iterator[None]:
    """``MODULE.NAME=VALUE`` settings of the backend's modules inside the block only,
    with ``conv``'s kept plans dropped on the way in and out (a depthwise forward's kept
    run is checked only against the settings ``conv._dw_settings`` names; on 2026-11-29 a
    route switch outside them was bypassed for every variant after the first), and the
    matmul's plans and lanes with them (the pointwise paths run on the matmul kernel,
    whose plans and lanes are keyed by call signature)."""
    from kernel_overrides import overridden

    from opbench.kernels._lib import conv, conv_backward, conv_pointwise, matmul, matmul_lanes

    kept = (conv._FORWARD_PLANS, conv_backward._POINTWISE_WGRAD_PLANS, conv_pointwise._LANES,
            matmul._MM_PLANS, matmul_lanes.LANES)  # fmt: skip
    with overridden(settings, kept):
        yield


def _geo(xs: list[float]) -> float | None:
    """The shared geomean, to three places for the table."""
    return None if (g := geomean(xs)) is None else round(g, 3)


def summarize(measured: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per half, operator and path: rows, wrong ones, declined ones, geomean and lowest
    speed-up over eager (rows of one path together; "all" over every path)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in measured:
        if r.get("skipped"):
            continue
        groups[(r["half"], r["op"], r["path"])].append(r)
        groups[(r["half"], r["op"], "all")].append(r)
        for name, v in r.get("variants", {}).items():  # a variant's rows, by its own paths
            groups[(r["half"], r["op"], f"[{name}] all")].append(v)
            groups[(r["half"], r["op"], f"[{name}] {v['path']}")].append(v)
    table = []
    for (half, op, path), rs in sorted(groups.items()):
        speed = [r["speedup"] for r in rs if r.get("speedup")]
        device = [r["device_speedup"] for r in rs if r.get("device_speedup")]
        table.append({
            "half": half, "op": op, "path": path, "rows": len(rs),
            "wrong": sum(r.get("correct") is False for r in rs),
            "declined": sum(r["path"] == "declined" for r in rs),
            "geomean": _geo(speed), "lowest": round(min(speed), 3) if speed else None,
            "device_geomean": _geo(device),
        })  # fmt: skip
    return table


def variant_effects(measured: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant, half and operator: each variant's speed-up over the defaults'
    (geomean of the row ratios, ``do_bench`` and device), apart over the rows whose
    launches it changed and the rows it launched as the defaults did. The second is the
    noise floor of the first: with the same kernels, grids and tiles, a ratio away from
    1 is the timing's, not the variant's (2026-11-30: ``do_bench`` moved such rows
    20-75%)."""
    groups: dict[tuple[str, str, str, bool], list[tuple[float | None, float | None]]]
    groups = defaultdict(list)

    def ratio(v: dict[str, Any], r: dict[str, Any], key: str) -> float | None:
        return v[key] / r[key] if v.get(key) and r.get(key) else None

    for r in measured:
        for name, v in r.get("variants", {}).items():
            groups[(name, r["half"], r["op"], bool(v.get("changed")))].append(
                (ratio(v, r, "speedup"), ratio(v, r, "device_speedup"))
            )
    table = []
    for (name, half, op, changed), ratios in sorted(groups.items()):
        table.append({
            "variant": name, "half": half, "op": op,
            "rows": "changed" if changed else "unchanged (noise floor)", "count": len(ratios),
            "vs_defaults": _geo([x for x, _ in ratios if x]),
            "device_vs_defaults": _geo([y for _, y in ratios if y]),
        })  # fmt: skip
    return table


def markdown(result: dict[str, Any]) -> list[str]:
    lines = [
        "# The reference backend's convolutions on each half of the traces, by path",
        "",
        f"{result['date']}, {result['device']}, torch {result['torch']}. The "
        f"{result['limit']} most used distinct rows of each half and operator "
        f"({result['rows_measured']} measured); speed-up is "
        "eager's time over the backend's (`triton.testing.do_bench`, median: host gaps "
        "between kernels included), device geomean the same over the sums of each side's "
        "kernel times (torch.profiler, 20 calls; none with `--no-profile`); rows checked "
        "against eager first. Split: `src/opbench/suites/trace_split.json`.",
        "",
        "| half | op | path | rows | wrong | declined | geomean | lowest | device geomean |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in result["table"]:
        lines.append(
            f"| {t['half']} | {t['op']} | {t['path']} | {t['rows']} | {t['wrong']} | "
            f"{t['declined']} | {t['geomean']} | {t['lowest']} | {t.get('device_geomean')} |"
        )
    effects = result.get("variant_effects") or []
    if effects:
        lines += [
            "", "Each variant against the defaults, row by row (geomean of the ratio of its "
            "speed-up to the defaults'; > 1: the variant faster), over the rows whose "
            "launches (kernels, grids, tiles) it changed and, as the timing's noise floor, "
            "the rows it launched as the defaults did:", "",
            "| variant | half | op | rows | count | do_bench | device |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]  # fmt: skip
        lines += [
            f"| {e['variant']} | {e['half']} | {e['op']} | {e['rows']} | {e['count']} "
            f"| {e['vs_defaults']} | {e['device_vs_defaults']} |"
            for e in effects
        ]
    lines += furthest_behind(result.get("rows", []))
    return lines + ["", f"Command: `{result['command']}`"]


def _kernels_text(kernels: dict[str, float], most: int = 4) -> str:
    """A row's kernels, longest first, as ``name us``; names cut to their first 28
    characters (eager's are C++ templates)."""
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:most]
    more = len(kernels) - len(top)
    text = ", ".join(f"`{k[:28]}` {v:g}" for k, v in top)
    return text + (f" (+{more})" if more > 0 else "")


def furthest_behind(rows: list[dict[str, Any]], count: int = 8) -> list[str]:
    """Markdown lines: the ``count`` rows of the lowest device speed-up under the
    defaults, each with its kernels' device time beside eager's (with ``--profile``):
    where a path's time goes, so a pathology (a GEMM of a few TFLOP/s, a sum kernel as
    long as the product) shows without a second run. None without device times."""
    timed = sorted((r for r in rows if r.get("device_speedup") and r.get("kernels_us")),
                   key=lambda r: r["device_speedup"])[:count]  # fmt: skip
    if not timed:
        return []
    lines = ["", f"The {len(timed)} rows furthest behind eager by device time (the defaults; "
             "kernel times in us, the sum of 20 calls' each divided by 20):", "",
             "| half | op | inputs | path | device speed-up | ours: total, kernels | "
             "eager: total, kernels |", "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in timed:
        shapes = ", ".join(re.findall(r"T\(\[[^\]]*\]", r["args"])[:3]).replace("T(", "")
        ours, eager = r["kernels_us"], r.get("eager_kernels_us") or {}
        lines.append(
            f"| {r['half']} | {r['op']} | {shapes} | {r['path']} | {r['device_speedup']:.3f} | "
            f"{sum(ours.values()):.1f}: {_kernels_text(ours)} | "
            f"{sum(eager.values()):.1f}: {_kernels_text(eager)} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", required=True)
    ap.add_argument("--limit", type=int, default=40, help="rows a half and operator")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated, of " + ", ".join(OPS))
    ap.add_argument("--match", default=None,
                    help="only rows whose argument text matches this regular expression")  # fmt: skip
    ap.add_argument("--strided", action="store_true",
                    help="only rows of a stride above 1 (the judged run's rows hold none)")  # fmt: skip
    ap.add_argument("--batch", type=int, default=None, metavar="N",
                    help="every row rewritten to N images (a grid rule tuned on the tuning "
                    "half's shapes at the held-out rows' batch)")  # fmt: skip
    ap.add_argument("--channels-last", action="store_true",
                    help="every row's activations rewritten to channels-last (the channels-"
                    "last kernels' settings decided on the tuning half's shapes)")  # fmt: skip
    ap.add_argument("--out", help="write OUT.json and OUT.md")
    ap.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                    help="a kernel module's constant for the whole run")  # fmt: skip
    ap.add_argument("--variant", action="append", default=[],
                    metavar="NAME=MODULE.NAME=VALUE[,MODULE.NAME=VALUE]",
                    help="also time each row under these settings, beside the same eager "
                    "time (repeatable); reported as [NAME] rows")  # fmt: skip
    ap.add_argument("--paths", default=None, metavar="REGEX",
                    help="time only rows whose path (as the defaults serve them) matches")  # fmt: skip
    ap.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True,
                    help="record each row's backend kernels and their device time (CUDA): "
                    "the column to judge a variant by. do_bench's host gaps moved rows a "
                    "variant leaves alone 20-75%% between two timings (2026-11-30)")  # fmt: skip
    ns = ap.parse_args()
    from kernel_overrides import apply_overrides

    ns.overrides = apply_overrides(ns.set)
    variants = {}
    for item in ns.variant:
        name, _, settings = item.partition("=")
        variants[name] = [x for x in settings.split(",") if x]
    ops = tuple(o for o in ns.ops.split(",") if o)
    if not ops or set(ops) - set(OPS):
        ap.error(f"--ops takes {', '.join(OPS)}")
    import torch

    # the halves in turn, most used first: a run cut short keeps both halves alike
    halves = [
        rows(ns.traces, half, ns.limit, ops, ns.match, ns.strided, ns.batch, ns.channels_last)
        for half in HALVES
    ]
    todo = [r for pair in itertools.zip_longest(*halves) for r in pair if r is not None]
    measured = []
    for i, r in enumerate(todo):
        t0 = time.perf_counter()
        try:
            m = measure(r, ns.device, variants, ns.paths, ns.profile)
        except Exception as e:  # noqa: BLE001 - a row that fails is reported, not fatal
            m = dict(r, path="failed", detail=f"{type(e).__name__}: {str(e)[:200]}")
        measured.append(m)
        print(json.dumps({k: m.get(k) for k in ("half", "op", "path", "correct", "speedup")}
                         | {n: v.get("speedup") for n, v in m.get("variants", {}).items()}
                         | {"row": f"{i + 1}/{len(todo)}",
                            "s": round(time.perf_counter() - t0, 1)}), flush=True)  # fmt: skip
        if ns.device.startswith("cuda"):
            torch.cuda.empty_cache()
        result = _result(ns, measured, len(todo))
        if ns.out:  # after every row: a run cut short by a time limit keeps what it has
            Path(ns.out).with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
            Path(ns.out).with_suffix(".md").write_text("\n".join(markdown(result)) + "\n")
    print("\n".join(markdown(_result(ns, measured, len(todo)))))


def _result(ns: argparse.Namespace, measured: list[dict[str, Any]], planned: int) -> dict[str, Any]:
    import torch

    gpu = torch.cuda.get_device_name() if ns.device.startswith("cuda") else "CPU (interpreter)"
    return {
        "date": time.strftime("%Y-%m-%d"), "device": gpu, "torch": torch.__version__,
        "limit": ns.limit, "command": "python3 " + " ".join(sys.argv),
        "overrides": getattr(ns, "overrides", {}),
        "rows_measured": f"{len(measured)} of {planned}",
        "table": summarize(measured), "variant_effects": variant_effects(measured),
        "rows": measured,
    }  # fmt: skip


if __name__ == "__main__":
    main()
