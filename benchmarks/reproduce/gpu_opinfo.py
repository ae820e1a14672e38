"""The OpInfo suite on CUDA: the quick profile whole, and the full profile on a slice.

Runs ``opbench run --suite opinfo --backend aten --device cuda --no-perf`` (quick: float32
and float16 ``sample_inputs``) with N workers (default: one per GPU), then the full
profile (``reference_inputs``, every dtype) for the same 14 ops the CPU slice in the
README used, and writes ``benchmarks/results/opinfo-cuda-<gpu>.json`` and ``.md`` (and
copies under ``$OUT``): wall time (first mapping build included when the cache is cold),
coverage (tests, overloads, operators, dtypes, variants), score, and every test that did
not pass.

Usage: python benchmarks/reproduce/gpu_opinfo.py [--workers N] [--budget 330] [--slice-budget 200]

Committed results: ``benchmarks/results/opinfo-cuda-h100.md``/``.json`` (1 x H100) and
``opinfo-cuda-h200.md``/``.json`` (2 x H200):
    python benchmarks/reproduce/gpu_opinfo.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_workers import REPO, run, write_results  # noqa: E402

#: The README's CPU slice of the full profile, for a like-for-like rate.
FULL_SLICE = "sin,add,mul,sum,mm,relu,exp,where,cat,abs,neg,div,maximum,clamp"


def render(result: dict) -> list[str]:
    """The markdown report of a result (identical failures counted, not repeated)."""
    from collections import Counter

    lines = [f"# OpInfo suite on {result['workers']} x {result['gpu']}", ""]
    for name, r in result["passes"].items():
        cov = r.get("coverage") or {}
        tests = r.get("tests") or {}
        timing = r.get("timing_s") or {}
        rate = (r.get("tests_recorded") or 0) / r["wall_s"] if r.get("wall_s") else 0
        lines += [
            f"## {name}",
            "",
            f"- command: `{r['command']}` (rc {r['rc']})",
            f"- wall {r['wall_s']:.1f} s (suite build {timing.get('build_suite')} s, tests "
            f"{timing.get('run')} s); {r.get('tests_recorded')} tests recorded, {rate:.1f} tests/s",
            f"- coverage: {json.dumps(cov)}",
            f"- results: {json.dumps(tests.get('by_status'))}; correctness_score "
            f"{r.get('correctness_score')} over {r.get('ops_in_denominator')} overloads; "
            f"{len(r.get('not_tested') or {})} overloads not tested (only weak tests)",
        ]
        seen = Counter(
            (f["op"], f["status"], f["category"], (f["message"] or "").splitlines()[0][:240])
            for f in r.get("not_passed") or []
        )
        for (op, status, category, msg), k in seen.most_common():
            lines.append(f"  - {op} {status} ({category}) x{k}: {msg}")
        lines.append("")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=None, help="default: the number of GPUs")
    p.add_argument("--budget", type=float, default=330.0, help="seconds, quick profile")
    p.add_argument("--slice-budget", type=float, default=200.0, help="seconds, full slice")
    p.add_argument("--workdir", default="/tmp/opbench-opinfo")
    p.add_argument("--device", default="cuda", help="cuda; cpu only to smoke-test this script")
    p.add_argument("--quick-ops", default=None, help="narrow the quick pass (smoke tests)")
    p.add_argument("--render", default=None, help="only re-write the markdown of this JSON")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    ns = p.parse_args()
    if ns.render:
        path = Path(ns.render)
        path.with_suffix(".md").write_text("\n".join(render(json.loads(path.read_text()))) + "\n")
        return 0
    import torch

    cuda = ns.device == "cuda"
    n = ns.workers or (max(1, torch.cuda.device_count()) if cuda else 1)
    gpu = torch.cuda.get_device_name(0) if cuda else "cpu"
    slug = "h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu"
    base = ["--suite", "opinfo", "--backend", "aten", "--device", ns.device, "--no-perf"]
    base += ["--workers", str(n)]
    wd = Path(ns.workdir)
    quick = [*base, "--ops", ns.quick_ops] if ns.quick_ops else base
    passes = {"quick": run(quick, wd / "quick", ns.budget)}
    if ns.slice_budget > 0:
        passes["full_slice"] = run(
            [*base, "--profile", "full", "--ops", FULL_SLICE], wd / "full", ns.slice_budget
        )
    result = {"gpu": gpu, "workers": n, "passes": passes}
    lines = render(result)
    write_results(Path(ns.out_dir), f"opinfo-{ns.device}-{slug}", result, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
