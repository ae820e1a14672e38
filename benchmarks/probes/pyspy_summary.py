"""Where a profiled process spent its active time: a ``py-spy record -f raw --threads``
file summed by thread kind and by function (each function counted once per sample, so a
caller holds its callees' time).

Usage: python benchmarks/probes/pyspy_summary.py harness4.raw --rate 25 \\
    [--functions plan_trials,_draw_float,cpu_copy] [--out summary.json]
Without ``--functions`` it prints the 40 costliest.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys


def summarize(path: str, rate: float, functions: list[str] | None) -> dict:
    by_function: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    samples = 0
    with open(path) as f:
        for n, line in enumerate(f, 1):
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                raise SystemExit(f"{path}:{n}: not a py-spy raw line (stack;stack COUNT)")
            frames = stack.split(";")
            samples += int(count)
            # "thread (123): opbench-plan_0" -> "opbench-plan"
            name = frames[0].split(":", 1)[-1].strip()
            by_thread[re.sub(r"[_\d]+$|-\d+ \(.*$", "", name)] += int(count)
            for fn in {fr.split(" (")[0] for fr in frames[1:]}:
                by_function[fn] += int(count)
    wanted = functions or [fn for fn, _ in by_function.most_common(40)]
    return {
        "file": path,
        "samples_per_s": rate,
        "active_s_total": round(samples / rate, 1),
        "active_s_by_thread_kind": {t: round(c / rate, 1) for t, c in by_thread.most_common(12)},
        "active_s_in": {fn: round(by_function[fn] / rate, 1) for fn in wanted},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("raw")
    p.add_argument("--rate", type=float, default=100.0, help="py-spy's -r")
    p.add_argument("--functions", default=None, help="comma-separated names to report")
    p.add_argument("--out", default=None)
    ns = p.parse_args()
    fns = ns.functions.split(",") if ns.functions else None
    result = summarize(ns.raw, ns.rate, fns)
    text = json.dumps(result, indent=1)
    if ns.out:
        with open(ns.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
