"""Candidates per second through ``opbench.Scorer``: one operator, a correct kernel scored
N times, in batches through ``Scorer.score_many`` (a reward loop's samples for one
prompt: the same operator, judged at once across the scorer's lanes). Each candidate is
written, scanned, imported by a fresh worker of its own that runs every test of the
suite for the op, and judged.

``--kernel numpy`` (default) scores a numpy ``relu``; ``--kernel triton`` scores the
prompts' Triton example (``abs``), what an LLM's Triton answer costs to judge: each
candidate's worker loads the compiled kernel from Triton's on-disk cache after the first.

Reports the scorer's own statistics (candidates/s, latency p50/p99, the share of lane
time outside the candidates' own tests), where a candidate's time goes (per candidate,
summed over lanes: the spare worker's fork, the candidate's import, its tests as the
harness waits for them and as the worker measured them, the judging), the machine's load
(this is a shared 2-core machine: its load average and the CPU other processes took are
recorded), and the cold start (the lanes' templates, the op's cases and expectations)
apart.

Usage: python benchmarks/reproduce/scorer_throughput.py [--device cpu] [--suite opinfo]
    [--dtypes f32] [--workers 1,2,4] [--batch 16] [--n 48] [--kernel numpy|triton]
Writes benchmarks/results/scorer-throughput-<device>-<suite>[-triton].json.

Committed results: ``benchmarks/results/scorer-throughput-cuda-opinfo-triton.json`` (one
H100, 2026-11-27: 4.7 candidates/s with one lane, 12.7 with four, 13.7 with eight)::
    python3 benchmarks/reproduce/scorer_throughput.py --device cuda --suite opinfo \
        --dtypes f32 --workers 1,4,8 --batch 16 --n 48 --kernel triton
``scorer-throughput-cuda-opinfo-triton-2gpus.json`` (2 x H200, 8 lanes: 11.0/s; its
printout, saved by hand)::
    python3 benchmarks/reproduce/scorer_throughput.py --device cuda --suite opinfo \
        --dtypes f32 --workers 8 --batch 32 --n 64 --kernel triton --no-write
(both read in ``scorer-throughput-cuda.md``, with the code before them),
and ``scorer-throughput-cpu-smoke.json``, ``scorer-throughput-cpu-opinfo.json``:
    python benchmarks/reproduce/scorer_throughput.py --device cpu --suite smoke --n 20
    python benchmarks/reproduce/scorer_throughput.py --device cpu --suite opinfo
"""

from __future__ import annotations

import argparse
import collections
import datetime
import functools
import json
import os
import platform
import resource
import threading
import time
from pathlib import Path
from typing import Any

import torch

import opbench

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
KERNEL = """
import numpy as np
import torch


def relu__default_kernel_impl(self):
    a = self.detach().cpu().numpy()
    return torch.from_numpy(np.asarray(np.maximum(a, 0), dtype=a.dtype)).to(self.device)
"""


TEMPLATES = Path(opbench.__file__).with_name("agent") / "templates"

#: kernel name -> (source, the overload it serves)
KERNELS = {
    "numpy": (KERNEL, "relu.default"),
    "triton": ((TEMPLATES / "example_triton.py").read_text(), "abs.default"),
}


class Phases:
    """Wall time spent in a few harness functions, summed over threads (lanes)."""

    def __init__(self) -> None:
        self.seconds: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def wrap(self, owner: Any, name: str, label: str) -> None:
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.seconds[label] += time.perf_counter() - t0
                    self.calls[label] += 1

        setattr(owner, name, timed)

    def reset(self) -> None:
        with self._lock:
            self.seconds.clear()
            self.calls.clear()


def _phases() -> Phases:
    import opbench.agent.scorer as scorer_mod
    import opbench.judge.expectations as expectations_mod
    import opbench.run.executor as executor_mod
    import opbench.run.pool as pool_mod

    p = Phases()
    p.wrap(pool_mod.WorkerFactory, "get", "worker from the lane's factory (spare's fork)")
    p.wrap(pool_mod.WorkerProcess, "load", "worker imports the candidate")
    p.wrap(pool_mod.WorkerProcess, "run_case", "tests, as the harness waits for them")
    p.wrap(executor_mod, "judge_outcome", "judging in the harness")
    p.wrap(expectations_mod, "plan_trials", "planning (expectations; cached per op)")
    p.wrap(scorer_mod.Scorer, "_judge", "a candidate in its lane, all of it")
    return p


def _cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def _own_cpu_s() -> float:
    """CPU seconds of this process and all its descendants (the lanes' templates and the
    workers forked from them), the reaped ones included (their parents' child times)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, list[str]] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stats[int(pid)] = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, fields in stats.items():
        children[int(fields[1])].append(pid)
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        fields = stats.get(pid)
        if fields is not None:  # utime, stime, and the reaped children's cutime, cstime
            total += sum(int(x) for x in fields[11:15]) / tick
        todo.extend(children.get(pid, ()))
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--suite", default="opinfo")
    p.add_argument("--dtypes", default="f32")
    p.add_argument("--workers", default="1,2,4", help="the scorer's lanes (a list: one run each)")
    p.add_argument("--batch", type=int, default=16, help="candidates per score_many call")
    p.add_argument("--n", type=int, default=48, help="candidates timed (after a warm-up)")
    p.add_argument("--kernel", choices=sorted(KERNELS), default="numpy")
    p.add_argument("--spares", type=int, help="spare workers per lane (default: the Scorer's)")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument("--out", default=None, help="write the JSON here instead of the results")
    p.add_argument(
        "--hosts",
        type=int,
        default=0,
        help="score through opbench.HostScorers with this many scorers on the local Ray "
        "node, --workers lanes each (what the Ray hop costs; hosts of their own add rate)",
    )
    a = p.parse_args()
    phases = _phases()
    lanes = [int(x) for x in str(a.workers).split(",")]
    if a.hosts:
        runs = [_measure_hosts(a, n) for n in lanes]
    else:
        runs = [_measure(a, n, phases) for n in lanes]
    command = (
        f"python benchmarks/reproduce/scorer_throughput.py --device {a.device} --suite {a.suite}"
        + (f" --dtypes {a.dtypes}" if a.dtypes else "")
        + f" --workers {a.workers} --batch {a.batch} --n {a.n}"
        + (f" --kernel {a.kernel}" if a.kernel != "numpy" else "")
        + (f" --spares {a.spares}" if a.spares else "")
        + (f" --hosts {a.hosts}" if a.hosts else "")
    )
    best = max(runs, key=lambda r: r["candidates_per_s"] or 0)
    out = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": command,
        "machine": {
            "host": platform.node(),
            "device": torch.cuda.get_device_name()
            if a.device.startswith("cuda")
            else platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "gpus": torch.cuda.device_count() if a.device.startswith("cuda") else 0,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "kernel": f"{a.kernel} {KERNELS[a.kernel][1]}",
        "tests_per_candidate": runs[0]["tests_per_candidate"],
        "best": {
            k: best[k]
            for k in (
                "lanes",
                "candidates_per_s",
                "latency_p50_s",
                "latency_p99_s",
                "outside_tests_share",
            )
        },  # fmt: skip
        "runs": runs,
    }
    print(json.dumps(out, indent=1))
    if a.no_write:
        return
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"scorer-throughput-{a.device.split(':')[0]}-{a.suite.split(':')[0]}"
    name += "-triton.json" if a.kernel == "triton" else ".json"
    (RESULTS / name).write_text(json.dumps(out, indent=1) + "\n")


def _score_batches(scorer: Any, source: str, op: str, first: Any, n: int, batch: int) -> None:
    """The timed part: ``n`` candidates through ``scorer.score_many`` in batches of
    ``batch``, each judged as the first one was (a Scorer or HostScorers alike)."""
    done = 0
    while done < n:
        k = min(batch, n - done)
        for v in scorer.score_many([(source, op)] * k):
            assert (v.passed, v.tests) == (first.passed, first.tests), v
        done += k


def _measure_hosts(a: argparse.Namespace, lanes: int) -> dict[str, Any]:
    """``a.hosts`` scorers of ``lanes`` lanes on the local Ray node through
    :class:`opbench.HostScorers`, timed as :func:`_measure` times one scorer (its own
    statistics; the per-phase breakdown is the hosts' business)."""
    from opbench.agent.scorer_hosts import HostScorers

    source, op = KERNELS[a.kernel]
    dtypes = a.dtypes.split(",") if a.dtypes else None
    t0 = time.perf_counter()
    with HostScorers(device=a.device, suite=a.suite, dtypes=dtypes, lanes=lanes,
                     per_node=a.hosts, spares=a.spares) as h:  # fmt: skip
        started = time.perf_counter() - t0
        warm_s = h.warm()
        first = h.score(source, op)
        assert first.passed > 0 and first.failures.keys() <= {"not_implemented"}, first
        h.score_many([(source, op)] * (lanes * a.hosts))  # every host's lanes judged once
        h.reset_stats()
        t1 = time.perf_counter()
        _score_batches(h, source, op, first, a.n, a.batch)
        wall = time.perf_counter() - t1
        stats = h.stats()
    return {
        "hosts": a.hosts,
        "lanes": lanes,
        "lanes_in_all": stats["lanes"],
        "batch": a.batch,
        "tests_per_candidate": first.tests,
        "tests_passed": first.passed,
        "start_s (actors, their scorers)": round(started, 2),
        "warm_s": round(warm_s, 2),
        "candidates": a.n,
        "wall_s": round(wall, 2),
        "candidates_per_s": stats["candidates_per_s"],
        "latency_p50_s": max(s["latency_p50_s"] or 0 for s in stats["per_host"]),
        "latency_p99_s": max(s["latency_p99_s"] or 0 for s in stats["per_host"]),
        "outside_tests_share": max(s["outside_tests_share"] or 0 for s in stats["per_host"]),
        "per_host": stats["per_host"],
    }


def _measure(a: argparse.Namespace, lanes: int, phases: Phases) -> dict[str, Any]:
    """One scorer with ``lanes`` lanes: warm it, score once per lane, then time ``a.n``
    candidates in batches of ``a.batch``."""
    source, op = KERNELS[a.kernel]
    dtypes = a.dtypes.split(",") if a.dtypes else None
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    with opbench.Scorer(
        device=a.device, suite=a.suite, dtypes=dtypes, workers=lanes, spares=a.spares
    ) as s:
        spares = s.config.spare_workers
        started = time.perf_counter() - t0
        warm_s = s.warm()
        t1 = time.perf_counter()
        first = s.score(source, op)
        # the Triton example declines strided inputs (not_implemented): judged all the same
        assert first.passed > 0 and first.failures.keys() <= {"not_implemented"}, first
        first_s = time.perf_counter() - t1
        s.score_many([(source, op)] * len(s.lanes))  # every lane has judged once
        s.reset_stats()
        phases.reset()
        t2, busy0, own0 = time.perf_counter(), _cpu_busy(), _own_cpu_s()
        rusage0 = resource.getrusage(resource.RUSAGE_SELF)
        _score_batches(s, source, op, first, a.n, a.batch)
        wall = time.perf_counter() - t2
        busy1, own1 = _cpu_busy(), _own_cpu_s()
        rusage1 = resource.getrusage(resource.RUSAGE_SELF)
        stats = s.stats()
    ncpu = os.cpu_count() or 1
    cpu_ms = (own1 - own0) / a.n * 1e3
    harness_cpu = rusage1.ru_utime + rusage1.ru_stime - rusage0.ru_utime - rusage0.ru_stime
    per_candidate_ms = {
        k: round(v / a.n * 1e3, 1) for k, v in phases.seconds.most_common() if phases.calls[k]
    }
    per_candidate_ms["tests, as the workers measured them"] = round(stats["tests_s"] / a.n * 1e3, 1)
    return {
        "lanes": lanes,
        "spares_per_lane": spares,
        "batch": a.batch,
        "tests_per_candidate": first.tests,
        "tests_passed": first.passed,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cores_busy_during_run (all processes)": round(
            (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]) * ncpu, 2
        ),
        "cores_used_by_this_benchmark": round((own1 - own0) / wall, 2),
        "scorer_start_s": round(started, 2),
        "warm_s (every lane's template and spare)": round(warm_s, 2),
        "first_score_s (builds the op's cases and expectations)": round(first_s, 2),
        "candidates": a.n,
        "wall_s": round(wall, 2),
        "candidates_per_s": stats["candidates_per_s"],
        "latency_p50_s": stats["latency_p50_s"],
        "latency_p99_s": stats["latency_p99_s"],
        "outside_tests_share": stats["outside_tests_share"],
        "ms_per_candidate_in_a_lane (summed over lanes; overlapping)": per_candidate_ms,
        "harness_cpu_ms_per_candidate": round(harness_cpu / a.n * 1e3, 1),
        "cpu_ms_per_candidate (harness and workers)": round(cpu_ms, 1),
        "candidates_per_s_if_every_core_were_ours (cpu_count / cpu per candidate)": round(
            ncpu * 1e3 / cpu_ms, 1
        )
        if cpu_ms > 0
        else None,
    }


if __name__ == "__main__":
    main()
