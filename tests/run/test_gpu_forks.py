"""On a GPU: workers are forks of the warm template again, they judge a Triton kernel on
CUDA (with the OpInfo preload the Scorer asks for), and a second worker of the same unit
loads the kernels the first compiled from the kept cache instead of compiling them.
Skipped without CUDA; run on the GPU machine with ``pytest tests/run/test_gpu_forks.py``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from opbench.run.pool import WorkerConfig, WorkerFactory
from opbench.run.triton_cache import unit_folder
from opbench.suites.case import Case

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

TRITON_RELU = """
import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)


def relu__default_kernel_impl(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y
"""

CASE = Case(op="relu.default", args="((T([4096, 33], f32),), {})", suite="t")


def test_forked_workers_judge_a_triton_kernel_and_reuse_its_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPBENCH_PRELOAD", "opinfo")
    kernels = tmp_path / "kernels"
    (kernels / "relu__default").mkdir(parents=True)
    (kernels / "relu__default" / "relu__default_implementation.py").write_text(TRITON_RELU)
    cfg = WorkerConfig(backend=str(kernels), device="cuda", sandbox="auto")
    factory = WorkerFactory(cfg, tmp_path / "logs", spares=False)
    seconds = []
    try:
        for _ in range(2):
            w = factory.get("cuda")
            t0 = time.perf_counter()
            w.load(("relu__default",))
            out = w.run_case(CASE.to_dict(), 120)
            seconds.append(time.perf_counter() - t0)
            assert out.kind == "result", (out.kind, out.detail, out.stderr_tail)
            report = out.message["report"]
            assert report["error"] is None, report
            w.stop()
        assert factory.forked >= 2, "workers were started anew: the template spoiled its forks"
        kept = unit_folder(str(kernels), ("relu__default",))
        assert any(kept.rglob("*.cubin")), "the compiled kernel was not kept"
        print("load + first test, cold then kept:", [f"{s:.2f}s" for s in seconds])
    finally:
        factory.close()
