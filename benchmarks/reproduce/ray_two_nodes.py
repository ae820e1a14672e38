"""A two-node Ray cluster on one host: a rehearsal of ``opbench run --executor ray
--ray-address HOST:PORT`` on a real cluster.

Starts ``ray start --head`` and a second node (``ray start --address``) on this machine,
each with its own share of the GPUs (``CUDA_VISIBLE_DEVICES`` split in two) or, on a
CPU, one CPU each; runs the same tests with ``--workers N`` (local) and with
``--executor ray --ray-address`` against the cluster; compares the verdicts test by test
and records which Ray nodes ran the tests (``summary.json``'s ``ray.nodes``). Then it
stops the second node in the middle of a second Ray run and checks that ``--resume``
against the head alone finishes every test the lost node left. The cluster is stopped at
the end (``ray stop``), also on failure.

Usage: python benchmarks/reproduce/ray_two_nodes.py [--device cuda] [--suite traces
    --traces .gpu_data/traces --ops ...] [--budget 300]
Writes benchmarks/results/ray-two-nodes-<device>.json and .md (and copies under $OUT).

Committed: ``ray-two-nodes-cpu.md``/``.json`` (2-core CPU, 2026-11-27)::
    python benchmarks/reproduce/ray_two_nodes.py --device cpu --budget 300 --limit-per-op 4 \
        --ops add.Tensor,mul.Tensor,relu.default,sum.dim_IntList,minimum.default,neg.default,\
div.Tensor,sub.Tensor,cat.default,clone.default,exp.default,mean.dim
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PORT = 6391
DEFAULT_OPS = "add.Tensor,mul.Tensor,relu.default,sum.dim_IntList,minimum.default,neg.default"


def _ray_bin() -> str:
    here = Path(sys.executable).with_name("ray")
    return str(here) if here.exists() else (shutil.which("ray") or "ray")


def _start_node(args: list[str], env: dict[str, str]) -> None:
    r = subprocess.run([_ray_bin(), "start", *args, "--disable-usage-stats"], env=env,
                       capture_output=True, text=True, timeout=180)  # fmt: skip
    if r.returncode != 0:
        raise SystemExit(
            f"ray start {' '.join(args)} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
        )


def _raylets() -> list[int]:
    """The raylet processes of this host, oldest first (the head's first)."""
    out = subprocess.run(["pgrep", "-f", "raylet/raylet"], capture_output=True, text=True)
    pids = [int(p) for p in out.stdout.split()]

    def started(pid: int) -> int:  # field 22 of /proc/PID/stat, after the command's ")"
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])

    return sorted(pids, key=started)


def _run(args: list[str], out: Path, budget: float, env: dict[str, str],
         kill_after: float | None = None) -> dict[str, Any]:  # fmt: skip
    """``opbench run ARGS --out OUT``; with ``kill_after``, the second node's raylet is
    killed that many seconds in (the run goes on with the head's actors)."""
    cmd = [sys.executable, "-m", "opbench.cli", "run", *args, "--out", str(out), "--quiet"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    killed = None
    if kill_after is not None:
        time.sleep(kill_after)
        raylets = _raylets()
        if len(raylets) >= 2 and proc.poll() is None:
            os.kill(raylets[-1], signal.SIGKILL)
            killed = raylets[-1]
    try:
        text, _ = proc.communicate(timeout=budget)
        rc: Any = proc.returncode
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        text, _ = proc.communicate()
        rc = "timeout"
    res: dict[str, Any] = {"command": "opbench run " + " ".join(args), "rc": rc,
                           "wall_s": round(time.perf_counter() - t0, 1)}  # fmt: skip
    if killed:
        res["killed_raylet_pid"] = killed
    summary = out / "summary.json"
    if summary.exists():
        s = json.loads(summary.read_text())
        res["ray"] = s.get("ray")
        res["unfinished"] = s.get("unfinished")
    db = out / "results.sqlite"
    if db.exists():
        con = sqlite3.connect(db)
        res["verdicts"] = {t: f"{st}/{cat or '-'}" for t, st, cat in
                           con.execute("select test_id, status, category from results")}  # fmt: skip
        con.close()
    if rc not in (0, 1):
        res["output_tail"] = text[-1500:]
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--suite", default="traces")
    p.add_argument("--traces", default=str(REPO.parent / "shared" / "traces"))
    p.add_argument("--ops", default=DEFAULT_OPS)
    p.add_argument("--limit-per-op", default="2")
    p.add_argument("--backend", default="aten")
    p.add_argument("--budget", type=float, default=300.0, help="seconds per run")
    p.add_argument("--kill-after", type=float, default=None,
                   help="seconds into the second Ray run to kill the second node "
                        "(default: a third of the first Ray run's wall time)")  # fmt: skip
    p.add_argument("--workdir", default="/tmp/opbench-ray-two-nodes")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    ns = p.parse_args()
    import torch

    cuda = ns.device.startswith("cuda")
    gpus = torch.cuda.device_count() if cuda else 0
    if cuda and gpus < 2:
        raise SystemExit("a two-node rehearsal on CUDA needs at least 2 GPUs on this host")
    wd = Path(ns.workdir)
    shutil.rmtree(wd, ignore_errors=True)
    wd.mkdir(parents=True)
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    half = gpus // 2
    head_env, node_env = dict(env), dict(env)
    if cuda:  # the halves of what this process sees (CUDA_VISIBLE_DEVICES may narrow it)
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = seen.split(",") if seen else [str(i) for i in range(gpus)]
        head_env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[:half])
        node_env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[half:gpus])
    res_args = (["--num-gpus", str(half)] if cuda else ["--num-gpus", "0"]) + ["--num-cpus", "1"]
    tests = ["--suite", ns.suite, "--backend", ns.backend, "--device", ns.device,
             "--ops", ns.ops, "--no-perf"]  # fmt: skip
    if ns.suite == "traces":
        tests += ["--traces", ns.traces, "--limit-per-op", ns.limit_per_op]
    slots = str(2 * half if cuda else 2)
    address = f"127.0.0.1:{PORT}"
    runs: dict[str, Any] = {}
    subprocess.run([_ray_bin(), "stop", "--force"], capture_output=True, env=env)
    try:
        _start_node(["--head", f"--port={PORT}", "--include-dashboard=false", *res_args], head_env)
        _start_node([f"--address={address}", *res_args], node_env)
        runs["local"] = _run([*tests, "--workers", slots], wd / "local", ns.budget, env)
        ray_args = [*tests, "--executor", "ray", "--ray-address", address, "--workers", slots]
        runs["ray, two nodes"] = _run(ray_args, wd / "ray", ns.budget, env)
        kill_after = ns.kill_after or max(3.0, runs["ray, two nodes"]["wall_s"] / 3)
        # the head has one CPU's actor already: a lost actor's slot stops waiting soon
        short = dict(env, OPBENCH_RAY_ACTOR_START_S="20")
        runs["ray, second node killed"] = _run(ray_args, wd / "ray-kill", ns.budget, short,
                                               kill_after=kill_after)  # fmt: skip
        runs["ray, --resume on the head"] = _run([*ray_args, "--resume"], wd / "ray-kill",
                                                 ns.budget, env)  # fmt: skip
    finally:
        subprocess.run([_ray_bin(), "stop", "--force"], capture_output=True, env=env)
    local = runs["local"].get("verdicts") or {}

    def differ(name: str) -> dict[str, Any]:
        got = runs[name].get("verdicts") or {}
        return {t: [v, got.get(t)] for t, v in local.items() if got.get(t) != v}

    compare = {name: differ(name) for name in runs if name != "local"}
    result = {"device": ns.device, "gpus": gpus, "runs": runs, "differ_from_local": compare}
    slug = "cpu"
    if cuda:
        name = torch.cuda.get_device_name(0)
        slug = f"{'h200' if 'H200' in name else 'h100' if 'H100' in name else 'gpu'}x{gpus}"
    lines = [
        f"# Two Ray nodes on one host ({ns.device}, {gpus} GPUs)",
        "",
        f"{time.strftime('%Y-%m-%d')}, torch {torch.__version__}; "
        f"`python benchmarks/reproduce/ray_two_nodes.py --device {ns.device}`",
        "",
        "| run | rc | wall s | tests | Ray nodes | differ from local | unfinished |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in runs.items():
        nodes = (r.get("ray") or {}).get("nodes")
        lines.append(
            f"| {name} | {r['rc']} | {r['wall_s']} | {len(r.get('verdicts') or {})} | "
            f"{len(nodes) if nodes else '-'} | {len(compare[name]) if name in compare else '-'} | "
            f"{(r.get('unfinished') or {}).get('tests', 0)} |"
        )
    out_dir = Path(ns.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"ray-two-nodes-{slug}"
    (out_dir / f"{stem}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    (out_dir / f"{stem}.md").write_text("\n".join(lines) + "\n")
    if os.environ.get("OUT"):
        for ext in ("json", "md"):
            shutil.copy(out_dir / f"{stem}.{ext}", Path(os.environ["OUT"]))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
