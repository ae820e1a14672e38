"""What the harness's planning of a suite costs, test by test, in one process: the trial
plan and expectations of every test (:func:`opbench.judge.expectations.plan_trials`:
inputs drawn, eager and the float64 reference run, trivial answers checked), and how much
of it is drawing inputs. The harness does this for every test of a run, beside the
workers; on a 4-GPU run it was as long as the workers' own time
(``results/scaling-traces-h100x4.md``).

Usage: python benchmarks/probes/planning_profile.py --traces ../shared/traces \\
    [--device cpu] [--limit-per-op 1] [--threads 1] [--top 15]
2026-11-27, 2-core CPU, 161 tests, one thread: 100.6 s planning (38.5 s of it drawing),
17.6 s trivial answers before the reference ran on copied inputs; 55.1 s (13.7 s drawing)
and 6.1 s after, on an idle machine; with chunked draws, drawing 10.1 s of 69.5 s while
CI's tests ran beside it.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--limit-per-op", type=int, default=1)
    p.add_argument("--threads", type=int, default=None, help="torch's CPU threads")
    p.add_argument("--top", type=int, default=15)
    ns = p.parse_args()
    warnings.filterwarnings("ignore")
    import torch

    from opbench.judge import expectations as ex
    from opbench.run.session import load_suite_cases, select_cases
    from opbench.run.setup import RunRequest
    from opbench.spec.judge_options import JudgeOptions
    from opbench.spec.ops import get_overload
    from opbench.suites import input_call, inputs

    if ns.threads:
        torch.set_num_threads(ns.threads)
    req = RunRequest(suite="traces", backend="aten", device=ns.device, traces=ns.traces,
                     limit_per_op=ns.limit_per_op)  # fmt: skip
    cases = select_cases(req, load_suite_cases(req, lambda _: None)).cases
    drawing = collections.Counter()
    elements = collections.Counter()
    current = ""
    real_draw = input_call.draw_seeded

    def timed_draw(n, dtype, kind, seed):
        t0 = time.perf_counter()
        out = real_draw(n, dtype, kind, seed)
        drawing[current] += time.perf_counter() - t0
        elements[current] += n
        return out

    inputs.draw_seeded = timed_draw  # the builder's own reference to it
    options = JudgeOptions()
    per: dict[str, tuple[float, float]] = {}
    for case in cases:
        current = case.op
        t0 = time.perf_counter()
        try:
            _, expected = ex.plan_trials(case, ns.device, options)
        except Exception as e:  # noqa: BLE001 - reported, the profile goes on
            print(f"{case.op}: {type(e).__name__}: {e}")
            continue
        t1 = time.perf_counter()
        for exp in expected.values():
            ex.trivial_for(case, get_overload(case.op), exp, options)
        per[case.op] = (t1 - t0, time.perf_counter() - t1)
    print(f"{len(cases)} tests on {ns.device}, torch threads {torch.get_num_threads()}")
    print(f"planning {sum(a for a, _ in per.values()):.1f} s, of it drawing "
          f"{sum(drawing.values()):.1f} s ({sum(elements.values()) / 1e9:.2f} G elements); "
          f"trivial answers {sum(b for _, b in per.values()):.1f} s")  # fmt: skip
    for op, (a, b) in sorted(per.items(), key=lambda kv: -sum(kv[1]))[: ns.top]:
        print(f"{a:7.2f} s plan {b:6.2f} s trivial  draw {drawing[op]:5.2f} s  {op}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
