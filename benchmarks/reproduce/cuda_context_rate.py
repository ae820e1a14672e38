"""How many fresh CUDA contexts a GPU gives per second: every candidate the Scorer judges
runs in a fresh process, which makes its own context, and on the H100 a 4-lane scorer
stayed near 4.5 candidates/s with 5 of 16 cores busy, its lanes waiting for spares.

Forks ``n`` children of a process that imported torch without touching CUDA (as the fork
server's template is), all at once; each makes its context (``torch.zeros(1, device=
"cuda")``, then a synchronize) and reports when it started and finished. Prints, for
each ``n``, the wall time for all of them, contexts per second and each child's own time:
if contexts are made one after another by the driver, the rate stays flat as ``n`` grows.
``--raw`` does the same through the driver API alone (``cuInit`` and the primary context),
without PyTorch.

``--gpus K`` spreads the children round-robin over the first K GPUs (each child sets
``CUDA_VISIBLE_DEVICES`` to its one GPU before CUDA starts; K=1: GPU 0): if the driver serialises contexts per GPU,
K GPUs give K times the rate; if per machine, the rate stays flat.

Usage: python3 benchmarks/reproduce/cuda_context_rate.py [--n 1,2,4,8] [--raw] [--gpus 1,2,4]

Committed result: ``benchmarks/results/cuda-context-rate-h100.md`` (one H100, 2026-11-27,
torch 2.11, driver 580.159.04), from::
    python3 benchmarks/reproduce/cuda_context_rate.py --n 1,2,4,8,16 [--raw]
    CUDA_DEVICE_MAX_CONNECTIONS=1 python3 benchmarks/reproduce/cuda_context_rate.py --n 1,8,16
(the JSON lines it prints, copied into the table by hand). The finding is why
``opbench.Scorer`` gives its GPU workers ``CUDA_DEVICE_MAX_CONNECTIONS=1``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import time

import torch


def _make_context(raw: bool) -> None:
    if raw:
        cuda = ctypes.CDLL("libcuda.so.1")
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        assert cuda.cuInit(0) == 0
        assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
        assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        assert cuda.cuCtxSetCurrent(ctx) == 0
        assert cuda.cuCtxSynchronize() == 0
    else:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()


def _round(n: int, raw: bool, gpus: int = 1) -> dict[str, float]:
    pipes, t0 = [], time.perf_counter()
    for i in range(n):
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(r)
            # before cuInit: the child sees one GPU, its share (as a scorer's lane does)
            os.environ["CUDA_VISIBLE_DEVICES"] = str(i % gpus)
            start = time.perf_counter()
            _make_context(raw)
            end = time.perf_counter()
            os.write(w, json.dumps([start - t0, end - t0]).encode())
            os._exit(0)
        os.close(w)
        pipes.append(r)
    spans = []
    for r in pipes:
        spans.append(json.loads(os.read(r, 256)))
        os.close(r)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    wall = time.perf_counter() - t0
    own = sorted(e - s for s, e in spans)
    return {
        "n": n,
        "gpus": gpus,
        "wall_s": round(wall, 3),
        "contexts_per_s": round(n / wall, 2),
        "own_s_min": round(own[0], 3),
        "own_s_max": round(own[-1], 3),
        "last_done_s": round(max(e for _, e in spans), 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", default="1,2,4,8")
    p.add_argument("--raw", action="store_true", help="the driver API alone, no PyTorch")
    p.add_argument("--gpus", default="1", help="GPU counts to spread the children over")
    a = p.parse_args()
    for gpus in (int(x) for x in a.gpus.split(",")):
        for n in (int(x) for x in a.n.split(",")):
            print(json.dumps(_round(n, a.raw, gpus)), flush=True)


if __name__ == "__main__":
    main()
