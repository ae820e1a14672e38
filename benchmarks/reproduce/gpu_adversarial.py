"""The adversarial corpus on a GPU, through the real ``opbench run`` path, with timing on.

Runs every trick of ``tests/adversarial`` (segfault, hang, exit, memory hog, patched
checkers and clocks, reading the reference with ``gc``, tensor subclass, deferred
thread, caching, calling PyTorch directly, from other threads, pools, threads started at
import, with dispatch modes disabled or silenced, only while timed, tampering with the
judge's classes, helpers and thread count, escaping the sandbox) plus the GPU-only ones
(a Triton kernel with an illegal memory access that poisons the CUDA context, and a
kernel that hides its work on a side stream), and the kernels that remember answers
across timed calls (``tests/adversarial/timed_kernels``, timed), next to honest kernels (numpy and
Triton), on ``cuda``: once with every static-scan rule allowed (the runtime layer, with
timing), once with the scan on (the default). Checks each verdict against the corpus's expectations and writes
``benchmarks/results/adversarial-<gpu>.json`` and ``.md`` (and copies under ``$OUT``).

Usage: python benchmarks/reproduce/gpu_adversarial.py [--sandbox auto|off|required]

Committed results: ``benchmarks/results/adversarial-h100.md``/``.json`` and
``adversarial-h200.md``/``.json`` (``--test-timeout 30``), ``adversarial-h100-nosandbox.md``/``.json``
(``--sandbox off``):
    python benchmarks/reproduce/gpu_adversarial.py --test-timeout 30
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

T0 = time.perf_counter()
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests" / "adversarial"))

import adversarial_corpus as corpus  # noqa: E402
import torch  # noqa: E402


def gpu_slug() -> str:
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    for tag in ("H100", "H200", "A100", "B200"):
        if tag in name:
            return tag.lower()
    return "".join(ch if ch.isalnum() else "-" for ch in name.lower())


def check(by_op: dict[str, list[Any]], sandbox_level: str) -> list[dict[str, Any]]:
    """One row per trick or honest kernel: what was expected, what happened, caught?"""
    rows: list[dict[str, Any]] = []

    def row(op: str, trick: str, expect: str, ok: bool) -> None:
        rs = by_op.get(op, [])
        got = Counter(f"{r.status}/{r.category or '-'}" for r in rs)
        msg = next((r.message for r in rs if r.message), "") or ""
        rows.append(
            {
                "op": op,
                "trick": trick,
                "expected": expect,
                "got": dict(got),
                "caught": ok,
                "message": msg.splitlines()[0][:200] if msg else "",
                "durations_s": [round(r.duration_s or 0.0, 2) for r in rs],
            }
        )

    for op, cats in {**corpus.EXPECTED, **corpus.TIMED_ONLY}.items():
        rs = by_op.get(op, [])
        ok = bool(rs) and all(r.status == "failed" and r.category in cats for r in rs)
        row(op, "see kernel docstring", "failed: " + "|".join(sorted(cats)), ok)
    for op in ("neg.default", "floor.default"):
        rs = by_op.get(op, [])
        crashes = sum(r.status == "failed" and r.category == "crash" for r in rs)
        not_run = sum(r.status == "not_run" for r in rs)
        ok = bool(rs) and crashes >= 3 and crashes + not_run == len(rs)
        trick = "segfault (ctypes)" if op == "neg.default" else "illegal memory access (Triton)"
        row(op, trick, "3 crashes, the rest not run", ok)
    for op, trick in corpus.SANDBOX_ONLY.items():
        rs = by_op.get(op, [])
        blocked = bool(rs) and all(r.status == "failed" and r.category == "error" for r in rs)
        expect = (
            "failed: error (blocked)" if sandbox_level == "bwrap" else "only a sandbox stops it"
        )
        row(op, trick, expect, blocked if sandbox_level == "bwrap" else True)
    for op in (*corpus.HONEST, *corpus.GPU_HONEST):
        rs = by_op.get(op, [])
        row(op, "honest", "passed", bool(rs) and all(r.status == "passed" for r in rs))
    rs = by_op.get(corpus.SIDE_STREAM, [])
    ok = bool(rs) and all(
        r.status != "passed" or (r.speedup is not None and r.speedup < 1.1) for r in rs
    )
    row(corpus.SIDE_STREAM, "work hidden on a side stream", "not faster than eager", ok)
    for r in rows:
        if r["op"] == corpus.SIDE_STREAM:
            r["speedup"] = [x.speedup for x in rs]
            r["flags"] = [x.flags for x in rs]
            r["timing_side_stream"] = [(x.timing or {}).get("side_stream") for x in rs]
    return rows


def check_scanned(by_op: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The same corpus with the static scan on (the default): what the scan recognises
    fails as ``tampering`` without a worker; every other trick still fails at run time;
    the honest kernels the scan has nothing against still pass."""
    rows = []
    for op, rs in sorted(by_op.items()):
        if op in corpus.SCAN_BLOCKS:
            expect = "failed: tampering (static scan, no worker)"
            ok = bool(rs) and all(r.category == "tampering" and not r.worker for r in rs)
        elif op in ("relu.default", "mul.Tensor", *corpus.GPU_HONEST):
            expect, ok = "passed", all(r.status == "passed" for r in rs)
        elif op in corpus.EXPECTED:
            expect = "failed"
            ok = all(r.status in ("failed", "not_run") for r in rs)
        else:
            continue
        got = Counter(f"{r.status}/{r.category or '-'}" for r in rs)
        msg = next((r.message for r in rs if r.message), "") or ""
        rows.append(
            {
                "op": op,
                "expected": expect,
                "got": dict(got),
                "caught": ok,
                "message": msg.splitlines()[0][:160] if msg else "",
            }
        )
    return rows


def check_remembered(by_op: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Kernels that remember answers across timed calls (judged with timing on): the one
    keyed on input objects fails as ``cheat``, the one keyed on addresses fails, the one
    lazy only while device-timed fails as ``cheat``, the honest ``mul`` passes with a
    speedup."""
    expect = {
        "minimum.default": ("failed: cheat", lambda r: r.category == "cheat"),
        "fmin.default": (
            "failed: cheat|wrong_result",
            lambda r: r.category in ("cheat", "wrong_result"),
        ),  # fmt: skip
        "maximum.default": ("failed: cheat", lambda r: r.category == "cheat"),
        "mul.Tensor": ("passed, timed", lambda r: r.status == "passed" and r.speedup),
    }
    rows = []
    for op, (what, good) in expect.items():
        rs = by_op.get(op, [])
        msg = next((r.message for r in rs if r.message), "") or ""
        rows.append({
            "op": op,
            "expected": what,
            "got": dict(Counter(f"{r.status}/{r.category or '-'}" for r in rs)),
            "caught": bool(rs) and all(good(r) for r in rs),
            "message": msg.splitlines()[0][:160] if msg else "",
        })  # fmt: skip
    return rows


def _print_progress(kind: str, payload: Any) -> None:
    if kind == "result":
        r = payload
        print(
            f"[{time.perf_counter() - T0:6.1f}s] {r.op} {r.status}/{r.category or '-'} "
            f"{(r.duration_s or 0):.1f}s {(r.message or '').splitlines()[0][:120] if r.message else ''}",
            flush=True,
        )
    else:
        print(f"[{time.perf_counter() - T0:6.1f}s] {kind}: {payload}", flush=True)


def _md_row(r: dict[str, Any], trick: str | None = None) -> str:
    """One table row: op, (trick), expected, what came back, caught?, the message."""
    got = ", ".join(f"{k} x{v}" for k, v in r["got"].items())
    cells = [r["op"], *([trick] if trick is not None else []), r["expected"], got]
    cells += ["yes" if r["caught"] else "**NO**", r["message"].replace("|", "\\|")]
    return "| " + " | ".join(cells) + " |"


def render_md(result: dict[str, Any]) -> str:
    e = result["env"]
    lines = [
        f"# Adversarial corpus on {e['gpu']}",
        "",
        f"- device: {e['gpu']}, CUDA {e['cuda']}, torch {e['torch']}, triton {e['triton']}, "
        f"Python {e['python']}",
        f"- command: `{result['command']}`",
        f"- sandbox level reached: {result['sandbox']}; duration {result['duration_s']:.1f} s; "
        f"{result['tests']} tests recorded of {result['expected_tests']} "
        f"(run completed: {result['completed']})",
        f"- caught: {result['caught']} of {len(result['rows'])} rows",
        "",
        "| op | trick | expected | got | caught | first line of the message |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [_md_row(r, r["trick"]) for r in result["rows"]]
    rem = result.get("remembered")
    if rem:
        lines += [
            "",
            "## Answers remembered across timed calls (timing on)",
            "",
            "| op | expected | got | caught | first line of the message |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [_md_row(r) for r in rem]
    sc = result.get("scanned_run")
    if sc:
        lines += [
            "",
            "## The same corpus with the static scan on (the default)",
            "",
            f"Completed: {sc['completed']}; caught {sc['caught']} of {len(sc['rows'])} rows; "
            f"{sc['duration_s']:.1f} s.",
            "",
            "| op | expected | got | ok | first line of the message |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [_md_row(r) for r in sc["rows"]]
    ss = next((r for r in result["rows"] if r["op"] == corpus.SIDE_STREAM), None)
    if ss:
        lines += [
            "",
            f"Side-stream kernel: speedup {ss.get('speedup')}, flags {ss.get('flags')}, "
            f"side-stream check {ss.get('timing_side_stream')}",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sandbox", default="auto")
    p.add_argument("--memory-limit-mb", type=int, default=6000)
    p.add_argument("--test-timeout", type=float, default=60.0)
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--work-dir", default=None, help="where the kernels and the run go")
    ns = p.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    import platform

    import triton

    env = {
        "gpu": torch.cuda.get_device_name(0),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
    }
    tmp = Path(ns.work_dir or tempfile.mkdtemp(prefix="opbench-adv-"))
    tmp.mkdir(parents=True, exist_ok=True)
    common = dict(
        gpu=True,
        device="cuda",
        workers=1,
        test_timeout_s=ns.test_timeout,
        sandbox=ns.sandbox,
        memory_limit_mb=ns.memory_limit_mb,
    )
    # the runtime layer: every scan rule allowed, so each trick is imported and run
    res = corpus.run_corpus(
        tmp,
        on_progress=_print_progress,
        perf=True,
        allow_rules=corpus.all_scan_rules(),
        **common,
    )
    # the default: the static scan first (no timing: the verdicts are what is checked)
    scanned = corpus.run_corpus(tmp / "scanned", perf=False, **common)
    scan_rows = check_scanned(scanned["by_op"])
    remembering = corpus.remembering_kernels(tmp / "remembering")
    remembered = check_remembered(
        corpus.run_timed(tmp, remembering, corpus.REMEMBERING_TRACE, device="cuda")
    )
    out, kernels, listener, by_op = res["out"], res["kernels"], res["listener"], res["by_op"]
    completed = res["error"] is None
    summary = res["summary"] or {"error": res["error"], "sandbox": "?"}
    results = [r for rs in by_op.values() for r in rs]
    sandbox_level = summary.get("sandbox", "?")
    rows = check(by_op, sandbox_level)
    escaped = {
        "run_dir_written": (out / "pwned.txt").exists(),
        "kernel_dir_written": (kernels / "pwned.txt").exists(),
        "connections": listener.connections,
    }
    result = {
        "env": env,
        "command": " ".join(["python"] + sys.argv),
        "sandbox": sandbox_level,
        "completed": completed and len(results) == corpus.n_cases(gpu=True),
        "tests": len(results),
        "expected_tests": corpus.n_cases(gpu=True),
        "caught": sum(r["caught"] for r in rows),
        "rows": rows,
        "scanned_run": {
            "completed": scanned["error"] is None,
            "caught": sum(r["caught"] for r in scan_rows),
            "rows": scan_rows,
            "duration_s": scanned["elapsed"],
        },
        "remembered": remembered,
        "escapes": escaped,
        "summary": {
            k: summary.get(k)
            for k in ("correctness_score", "performance_score", "tests", "sandbox", "error")
        },
        "duration_s": time.perf_counter() - T0,
    }
    dirs = [Path(ns.out_dir)] + ([Path(os.environ["OUT"])] if os.environ.get("OUT") else [])
    slug = gpu_slug()
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        (d / f"adversarial-{slug}.json").write_text(json.dumps(result, indent=1, default=str))
        (d / f"adversarial-{slug}.md").write_text(render_md(result))
    if os.environ.get("OUT"):  # the run itself (store, logs), for a post-mortem
        import tarfile

        with tarfile.open(Path(os.environ["OUT"]) / "adversarial-run.tgz", "w:gz") as tar:
            tar.add(out, arcname="run")
    print(render_md(result))
    ok = result["completed"] and result["caught"] == len(rows)
    ok = ok and all(r["caught"] for r in remembered)
    return 0 if ok and result["scanned_run"]["caught"] == len(scan_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
