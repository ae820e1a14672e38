"""Time outside tests on a GPU: the traces suite on the Triton backend, with workers forked
from a warm template and Triton's compiled kernels kept between runs, against workers
started anew (how every GPU run went before forks could use CUDA).

Three runs of ``opbench run --suite traces --backend triton --device cuda --limit-per-op 1
--workers 1`` (perf on), one after another on one GPU:
1. forks, an empty kept-kernel cache (``OPBENCH_CACHE_DIR`` fresh): the cold compile;
2. forks, the cache the first run left: what every later run costs;
3. workers started anew (``OPBENCH_FORK_SERVER=0``), the same cache: the old start path.
"Outside tests" is the run's wall time less the time its workers spent in tests
(``duration_s`` summed; one worker, so nothing overlaps). The verdicts of the three runs
are compared test by test.

Usage (GPU machine): python3 benchmarks/reproduce/worker_overhead.py --traces .gpu_data/traces
Writes benchmarks/results/worker-overhead-<gpu>.json and .md (and copies under $OUT).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_workers import REPO, run, write_results  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", required=True)
    p.add_argument("--budget", type=float, default=200.0, help="seconds per run")
    p.add_argument("--limit-per-op", default="1")
    p.add_argument("--workdir", default="/tmp/opbench-overhead")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    ns = p.parse_args()
    import torch

    gpu = torch.cuda.get_device_name(0)
    slug = "h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu"
    wd = Path(ns.workdir)
    args = ["--suite", "traces", "--traces", ns.traces, "--backend", "triton", "--device", "cuda"]
    args += ["--limit-per-op", ns.limit_per_op, "--workers", "1", "--perf"]
    variants = [
        ("forks, cold compile", {"OPBENCH_CACHE_DIR": str(wd / "cache")}),
        ("forks, kept kernels", {"OPBENCH_CACHE_DIR": str(wd / "cache")}),
        ("started anew, kept kernels", {"OPBENCH_CACHE_DIR": str(wd / "cache"),
                                        "OPBENCH_FORK_SERVER": "0"}),
    ]  # fmt: skip
    passes = {}
    saved = dict(os.environ)
    for i, (name, env) in enumerate(variants):
        os.environ.update(env)
        try:
            r = run(args, wd / f"run{i}", ns.budget)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        r["outside_tests_s"] = round(r["wall_s"] - (r.get("worker_s_total") or 0.0), 1)
        passes[name] = r
        print(name, {k: r.get(k) for k in ("rc", "wall_s", "worker_s_total", "outside_tests_s")})
    first = next(iter(passes.values())).get("verdicts") or {}
    differ = {  # tests a run judged otherwise (a test it never reached is not one)
        name: {t: [v, (r.get("verdicts") or {}).get(t)] for t, v in first.items()
               if (r.get("verdicts") or {}).get(t) not in (v, None)}
        for name, r in passes.items()
    }  # fmt: skip
    unreached = {
        name: sorted(set(first) - set(r.get("verdicts") or {})) for name, r in passes.items()
    }
    result = {"gpu": gpu, "command": "opbench run " + " ".join(args), "passes": passes,
              "verdicts_differ_from_first": differ, "tests_not_reached": unreached}  # fmt: skip
    lines = [
        f"# Time outside tests, Triton backend, traces suite, 1 worker, {gpu}",
        "",
        f"`opbench run {' '.join(args)}`, three runs in a row "
        "(`python3 benchmarks/reproduce/worker_overhead.py --traces TRACES`).",
        "",
        "| run | rc | tests | wall s | in tests s | outside tests s | outside share |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in passes.items():
        share = r["outside_tests_s"] / r["wall_s"] if r["wall_s"] else 0.0
        lines.append(
            f"| {name} | {r['rc']} | {r.get('tests_recorded')} | {r['wall_s']:.1f} | "
            f"{r.get('worker_s_total')} | {r['outside_tests_s']} | {share:.2f} |"
        )
    lines += ["", "Verdicts that differ from the first run: "
              + ", ".join(f"{k}: {len(v)}" for k, v in differ.items())
              + "; tests a run did not reach (cut short): "
              + ", ".join(f"{k}: {len(v)}" for k, v in unreached.items())]  # fmt: skip
    write_results(Path(ns.out_dir), f"worker-overhead-{slug}", result, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
