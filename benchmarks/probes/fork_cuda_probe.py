"""Which of the fork-server template's steps leaves its forks unable to use CUDA.

For each prefix of :func:`opbench.run.forkserver.template_steps`, a fresh interpreter
with the template's environment (:func:`forkserver.template_env`) runs the steps, then
forks a child that puts the harness's GPUs back, adds two tensors on the GPU and launches
a Triton kernel. Prints one line per prefix: the child's exit (0, a code, or a signal).
Open finding: forks of a warm template died with SIGSEGV at their first CUDA call on the
H100 (2026-11-27) although no step asked CUDA anything through torch.cuda.

Usage (GPU machine): OPBENCH_PRELOAD=opinfo python3 benchmarks/probes/fork_cuda_probe.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import os, sys
from opbench.run import forkserver
steps = forkserver.template_steps()
upto = int(sys.argv[1])
skip = set(sys.argv[2].split(",")) if len(sys.argv) > 2 and sys.argv[2] else set()
for name, step in steps[:upto]:
    if name not in skip:
        step()
import torch
print("ran:", [n for n, _ in steps[:upto] if n not in skip], "| cuda initialised:",
      torch.cuda.is_initialized(), "| threads:", len(os.listdir("/proc/self/task")), flush=True)
pid = os.fork()
if pid == 0:
    code = 1
    try:
        forkserver.restore_visible_devices()
        x = torch.ones(4, device="cuda")
        assert float((x + x).sum().item()) == 8.0
        import triton, triton.language as tl

        @triton.jit
        def k(p, n, B: tl.constexpr):
            o = tl.arange(0, B)
            tl.store(p + o, tl.load(p + o, mask=o < n) * 2, mask=o < n)

        k[(1,)](x, 4, B=8)
        assert float(x.sum().item()) == 8.0
        code = 0
    except BaseException as e:
        print("child:", type(e).__name__, str(e)[:300], flush=True)
    os._exit(code)
_, status = os.waitpid(pid, 0)
if os.WIFSIGNALED(status):
    print("fork: killed by signal", os.WTERMSIG(status))
else:
    print("fork: exit", os.WEXITSTATUS(status))
"""


def main() -> None:
    from opbench.run import forkserver

    names = [n for n, _ in forkserver.template_steps()]
    env = forkserver.template_env(dict(os.environ), "cuda")
    variants = [(k, "") for k in range(len(names) + 1)]
    variants.append((len(names), "warm-up: first call"))
    script = Path(tempfile.mkdtemp()) / "fork_child.py"  # Triton's @jit needs a file
    script.write_text(CHILD)
    for upto, skip in variants:
        r = subprocess.run(
            [sys.executable, str(script), str(upto), skip],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        print(f"--- steps[:{upto}] skip={skip!r} rc={r.returncode}")
        print(r.stdout.strip())
        if r.returncode:
            print(r.stderr.strip()[-800:])


if __name__ == "__main__":
    main()
