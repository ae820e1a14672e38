"""One suite over 1, 2 and 4 GPUs of one machine, with local workers and with Ray: how the
wall time scales with GPUs, and whether ``--executor ray`` gives the same verdict as
``--workers N`` for every test, in how much of its time.

Each run is ``opbench run --suite SUITE --backend aten --device cuda --no-perf`` in a
directory of its own, limited to the first N GPUs with ``CUDA_VISIBLE_DEVICES``:
``local:N`` with ``--workers N`` (one worker a GPU), ``ray:N`` with ``--executor ray``
(a Ray head started by the run itself, one actor a GPU). The suite is built once before
any run is timed (``--warm``: the OpInfo mapping is cached on disk per device), so every
run's wall time holds the same build from the cache, its workers and its tests.

``raycluster:N`` is ``ray:N`` against a Ray head started before the timed run
(``--ray-address``), as on a real cluster: its wall time holds no cluster start, which
``cluster_start_s`` reports beside it.

``--runs`` lists the runs in order; ``a+b`` runs two at once on disjoint GPUs (the first
on GPUs 0.., the second on the GPUs after it: a comparison of Ray with local workers made
under the same load, for half the machine time); ``--merge FILE`` adds the runs of an earlier
call's JSON (a lent GPU machine takes 10 minutes a command: the runs are split over
two calls on the same warm machine). The JSON and markdown are written after every run,
so a call cut short still brings back the runs it finished.

Usage: python3 benchmarks/reproduce/gpu_scaling.py --suite opinfo --warm \\
    --runs local:4,ray:4,local:2,ray:2,local:1 [--budget 400] [--merge PREV.json] \\
    [--env OPBENCH_PLAN_AHEAD=2] [--profile]
    python3 benchmarks/reproduce/gpu_scaling.py --suite traces --traces .gpu_data/traces ...
Writes benchmarks/results/scaling-<suite>-<gpu>x<max N>.json and .md (and under $OUT).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpu_workers import REPO, run, stack_dump, write_results

#: What each run's entry keeps of ``gpu_workers.run``'s result.
KEPT = ("command", "rc", "wall_s", "tests_recorded", "worker_s_total", "judge_s_total",
        "correctness_score", "timing_s", "not_passed", "output_tail", "stack_at_timeout",
        "by_device")  # fmt: skip


def _suite_args(ns: argparse.Namespace) -> list[str]:
    args = ["--suite", ns.suite, "--backend", "aten", "--device", "cuda", "--no-perf"]
    if ns.suite == "traces":
        args += ["--traces", ns.traces, "--limit-per-op", str(ns.limit_per_op)]
    if ns.dtypes:
        args += ["--dtypes", ns.dtypes]
    return args


def _warm(ns: argparse.Namespace) -> float:
    """Build the suite once (untimed by the runs): the OpInfo mapping lands in the cache."""
    code = (
        "import sys, time; sys.path.insert(0, 'src'); t0 = time.monotonic()\n"
        "from opbench.run.setup import RunRequest\n"
        "from opbench.run.session import load_suite_cases\n"
        f"req = RunRequest(suite={ns.suite!r}, backend='aten', device='cuda', "
        f"traces={ns.traces!r}, dtypes={ns.dtypes.split(',') if ns.dtypes else None!r})\n"
        "say = lambda line: print(f'{time.monotonic() - t0:7.1f} s', line, flush=True)\n"
        "say(f'{len(load_suite_cases(req, say))} cases')\n"
    )
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    try:
        rc = proc.wait(timeout=ns.budget)
    except subprocess.TimeoutExpired:  # where the build sat, then give up
        print(stack_dump(proc.pid), flush=True)
        proc.kill()
        raise SystemExit(f"the suite's build took over {ns.budget:.0f} s") from None
    if rc != 0:
        raise SystemExit(f"the suite's build failed (exit {rc})")
    return round(time.perf_counter() - t0, 1)


def _start_cluster(gpus: int, first_gpu: int, env: dict[str, str]) -> tuple[str, float]:
    """A Ray head on these GPUs, started before the timed run (``raycluster:N``), as a
    real cluster is running before anyone points opbench at it; its address and how
    long it took to start."""
    from ray_two_nodes import _ray_bin, _start_node

    port = 6400 + first_gpu  # runs at once on disjoint GPUs get heads of their own
    subprocess.run([_ray_bin(), "stop", "--force"], capture_output=True, env={**os.environ, **env})
    t0 = time.perf_counter()
    _start_node([f"--port={port}", "--head", "--include-dashboard=false",
                 f"--num-gpus={gpus}"], {**os.environ, **env})  # fmt: skip
    return f"127.0.0.1:{port}", round(time.perf_counter() - t0, 1)


def _one(ns: argparse.Namespace, name: str, first_gpu: int = 0) -> dict[str, Any]:
    kind, _, n = name.partition(":")
    gpus = int(n)
    visible = ",".join(str(first_gpu + i) for i in range(gpus))
    env = {**ns.env_vars, "CUDA_VISIBLE_DEVICES": visible}
    args = _suite_args(ns) + (
        ["--workers", str(gpus)] if kind == "local" else ["--executor", "ray"]
    )
    cluster: dict[str, Any] = {}
    if kind == "raycluster":
        address, cluster["cluster_start_s"] = _start_cluster(gpus, first_gpu, env)
        args += ["--ray-address", address, "--workers", str(gpus)]
    profile = Path(ns.out_dir) / f"harness-{name.replace(':', '-')}.raw" if ns.profile else None
    try:
        res = run(args, Path(ns.workdir) / name.replace(":", "-"), ns.budget, env, profile,
                  ns.profile_mode)  # fmt: skip
    finally:
        if kind == "raycluster":
            from ray_two_nodes import _ray_bin

            subprocess.run([_ray_bin(), "stop", "--force"], capture_output=True,
                           env={**os.environ, **env})  # fmt: skip
    entry = {k: res.get(k) for k in KEPT if res.get(k) is not None} | cluster
    if profile is not None and profile.exists():  # where the harness's time went
        sys.path.insert(0, str(REPO / "benchmarks" / "probes"))
        from pyspy_summary import summarize

        entry["harness_profile"] = summarize(str(profile), 25, None)
    entry.update(gpus=gpus, executor=kind, cuda_visible_devices=visible)
    entry["verdicts"] = res.get("verdicts") or {}
    return entry


def _step(ns: argparse.Namespace, step: str) -> dict[str, dict[str, Any]]:
    """One step of ``--runs``: a run, or runs joined by ``+`` at once on disjoint GPUs."""
    from concurrent.futures import ThreadPoolExecutor

    names = step.split("+")
    firsts = [sum(int(n.partition(":")[2]) for n in names[:i]) for i in range(len(names))]
    with ThreadPoolExecutor(len(names)) as pool:
        entries = list(pool.map(lambda nf: _one(ns, *nf), zip(names, firsts)))
    for name, entry in zip(names, entries):
        entry["concurrent_with"] = [n for n in names if n != name]
    return dict(zip(names, entries))


def _analyse(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Scaling of local runs over the one-GPU run, and Ray against local per GPU count."""
    out: dict[str, Any] = {"scaling": {}, "ray_vs_local": {}}
    one = runs.get("local:1")
    for name, r in runs.items():
        if r["executor"] == "local" and one and one.get("rc") == 0 and r.get("rc") == 0:
            out["scaling"][name] = round(one["wall_s"] / r["wall_s"], 2)
        local = runs.get(f"local:{r['gpus']}")
        if r["executor"] in ("ray", "raycluster") and local:
            lv, rv = local["verdicts"], r["verdicts"]
            out["ray_vs_local"][name] = {
                "tests_local": len(lv),
                "tests_ray": len(rv),
                "same_verdicts": sum(rv.get(t) == v for t, v in lv.items()),
                "differ": {t: [v, rv.get(t)] for t, v in lv.items() if rv.get(t) != v},
                "wall_ratio": round(r["wall_s"] / local["wall_s"], 3)
                if r.get("rc") == 0 and local.get("rc") == 0
                else None,
            }
    return out


def _loads(run: dict[str, Any], key: str) -> str:
    """One figure of each GPU's share of a run (``by_device``), as ``a / b / ...``."""
    loads = run.get("by_device") or {}
    return " / ".join(str(d[key]) for d in loads.values()) or "-"


def _first_results(timing: dict[str, Any]) -> str:
    """Each slot's first result, in seconds from the tests' start (the run's own
    ``timing_s.slots_start``: the judging process and the first worker both started)."""
    slots = timing.get("slots_start") or []
    return " / ".join(str(s.get("result_s", "-")) for s in slots) or "-"


def _markdown(result: dict[str, Any]) -> list[str]:
    a = result["analysis"]
    lines = [
        f"# {result['suite']} suite over 1, 2 and 4 GPUs: local workers and Ray",
        "",
        f"{result['date']}, {result['gpus_on_machine']} x {result['gpu']}, torch "
        f"{result['torch']}; suite built once before the runs ({result.get('warm_s')} s). "
        "One worker (or Ray actor) a GPU, `--no-perf`.",
        "",
        "| run | rc | wall s | tests | passed share | build s | tests s | over 1 GPU | Ray / local wall | same verdicts | tests a GPU | slots' first results s | GPUs' last results s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in result["runs"].items():
        t = r.get("timing_s") or {}
        rv = a["ray_vs_local"].get(name)
        same = f"{rv['same_verdicts']} of {rv['tests_local']}" if rv else "-"
        lines.append(
            f"| {name}{' (at once with ' + ', '.join(r['concurrent_with']) + ')' if r.get('concurrent_with') else ''} | {r.get('rc')} | {r.get('wall_s', 0):.1f} | {r.get('tests_recorded')} | "
            f"{r.get('correctness_score')} | {t.get('build_suite')} | {t.get('run')} | "
            f"{a['scaling'].get(name, '-')} | {rv['wall_ratio'] if rv else '-'} | {same} | "
            f"{_loads(r, 'tests')} | {_first_results(t)} | {_loads(r, 'last_result_s')} |"
        )
    for name, rv in a["ray_vs_local"].items():
        if rv["differ"]:
            lines += ["", f"{name} differs from local on {len(rv['differ'])} tests:"]
            lines += [
                f"- `{t}`: local {v[0]}, ray {v[1]}" for t, v in list(rv["differ"].items())[:20]
            ]
    lines += ["", "Commands:", ""] + [
        f"- `CUDA_VISIBLE_DEVICES={r.get('cuda_visible_devices')} {r['command']}`"
        for r in result["runs"].values()
    ]
    lines += ["", f"`{result['command']}`"]
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", choices=["opinfo", "traces"], default="opinfo")
    p.add_argument("--traces", default=None, help="the traces suite's folder")
    p.add_argument("--limit-per-op", type=int, default=1)
    p.add_argument("--dtypes", default=None)
    p.add_argument("--runs", default="local:4,ray:4,local:2,ray:2,local:1")
    p.add_argument("--budget", type=float, default=400.0, help="seconds per run")
    p.add_argument("--warm", action="store_true", help="build the suite once first")
    p.add_argument("--merge", default=None, help="an earlier call's JSON to add to")
    p.add_argument("--workdir", default="/tmp/opbench-scaling")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--profile", action="store_true",
                   help="each run under py-spy (the harness's time, summed in the JSON)")  # fmt: skip
    p.add_argument("--profile-mode", choices=["threads", "gil", "processes"], default="threads",
                   help="what --profile samples (gpu_workers.run)")  # fmt: skip
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="set for every run (OPBENCH_PLAN_AHEAD=2); named in the files' stem")  # fmt: skip
    ns = p.parse_args()
    ns.env_vars = dict(kv.split("=", 1) for kv in ns.env if "=" in kv)
    if len(ns.env_vars) != len(ns.env):
        p.error("--env takes KEY=VALUE")
    if ns.suite == "traces" and not ns.traces:
        p.error("--suite traces needs --traces")
    import datetime

    import torch

    gpu = torch.cuda.get_device_name(0)
    slug = "h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu"
    steps = [r for r in ns.runs.split(",") if r]
    names = [n for step in steps for n in step.split("+")]
    result: dict[str, Any] = {"runs": {}}
    if ns.merge:
        result = json.loads(Path(ns.merge).read_text())
    result.update(
        date=datetime.date.today().isoformat(), suite=ns.suite, gpu=gpu,
        gpus_on_machine=torch.cuda.device_count(), torch=torch.__version__,
        command="python3 benchmarks/reproduce/gpu_scaling.py " + " ".join(sys.argv[1:]),
    )  # fmt: skip
    if ns.warm:
        result["warm_s"] = _warm(ns)
    if not names:  # --warm alone: the cache for later calls
        return 0
    most = max(int(n.partition(":")[2]) for n in [*names, *result["runs"]])
    stem = f"scaling-{ns.suite}-{slug}x{most}" + "".join(
        f"-{k.lower()}-{v}" for k, v in sorted(ns.env_vars.items())
    )
    result["env"] = ns.env_vars
    for step in steps:
        print(f"== {step}", flush=True)
        result["runs"].update(_step(ns, step))
        result["analysis"] = _analyse(result["runs"])
        write_results(Path(ns.out_dir), stem, result, _markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
