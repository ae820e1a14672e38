"""The kernels the C++ gate launches take the arguments it passes, in its order: the flat
and strided elementwise kernels compiled for sm_90 on the CPU machine (in a process of its
own: these tests run under Triton's interpreter), their PTX parameters read against
``gate_native.h``'s: pointers, the integers (one count, or the strided kernel's 20), five
float64 numbers, then only Triton's scratch pointers, which the gate passes as null. A
kernel signature changed without the gate would launch with its numbers in the wrong
slots; the GPU tests (test_native_launch.py) would see wrong values, this sees it here.
And ``copy_``'s gate kernel, which is handed self as its first operand, loads only the
source: Triton drops the dead load, so the copy reads what the Python path's reads."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "src" / "opbench" / "backends" / "native" / "gate_native.h"

COMPILE = r"""
import json, re, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from opbench.kernels._lib import arithmetic
from opbench.kernels._lib.pointwise_kernels import _flat_kernel, _strided_kernel

from opbench.kernels._lib import copy
from opbench.kernels._lib.pointwise import IDENTITY

out = {}
for name, fn, extra in (
    ("flat", _flat_kernel, {}),
    ("strided", _strided_kernel, {"NDIM": 2}),
    # copy_ on the gate (self as a, its load dead) and the Python path's copy (the source as a)
    ("copy_source", _flat_kernel, {"FN": copy._source}),
    ("copy_identity", _flat_kernel, {"FN": IDENTITY, "B": 0}),
):
    consts = {**dict(FN=arithmetic._add, A=1, B=1, C=0, COMPUTE=tl.float32, BLOCK=1024,
                     IDX=tl.int32), **extra}
    sig, cst = {}, {}
    for i, arg in enumerate(fn.arg_names):
        if arg in consts:
            sig[arg] = "constexpr"
            cst[(i,)] = consts[arg]
        elif arg.endswith("_ptr"):
            sig[arg] = "*fp16"
        elif arg in ("na", "nb", "nc", "p0", "p1"):
            sig[arg] = "fp64"
        else:
            sig[arg] = "i64"
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(4)}
    k = triton.compile(ASTSource(fn, sig, cst, attrs), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": 4})
    entry = re.search(r"\.entry\s+[\w$]+\s*\((.*?)\)", k.asm["ptx"], re.S).group(1)
    out[name] = [("ptr" if ".ptr" in p else p.split()[1]) for p in entry.split(",") if p.strip()]
    out[name + " loads"] = len(re.findall(r"\bld\.global", k.asm["ptx"]))
print(json.dumps(out))
"""


def _gate_constants() -> dict[str, int]:
    text = GATE.read_text()
    m = re.search(r"constexpr int kFlatParams = (\d+), kStridedParams = (\d+)", text)
    assert m, "gate_native.h no longer names kFlatParams and kStridedParams"
    return {"flat": int(m.group(1)), "strided": int(m.group(2))}


@pytest.mark.slow
def test_the_gate_passes_each_kernel_its_parameters_in_order():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run(
        [sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    params = json.loads(done.stdout.strip().splitlines()[-1])
    # copy_'s kernel on the gate reads one stream, as the Python path's copy does
    assert params["copy_source loads"] == params["copy_identity loads"] > 0, params
    ints = {"flat": 1, "strided": 20}
    for name, count in _gate_constants().items():
        got = params[name]
        want = ["ptr"] * 4 + [".u64"] * ints[name] + [".f64"] * 5
        assert len(want) == count, f"gate_native.h's {name} count {count} is not {len(want)}"
        assert got[:count] == want, (name, got)
        assert all(p == "ptr" for p in got[count:]), (name, got[count:])
        assert len(got) - count <= 6, "more scratch pointers than the gate accepts"


class _Compiled:
    """Stands in for a compiled Triton kernel (a real one needs a GPU to load): what
    ``launch_handle`` reads of it, its metadata and its PTX entry of ``params``."""

    def __init__(self, params: int, **meta: object) -> None:
        self.function = 0xBEEF
        self.asm = {
            "ptx": ".entry k(" + ", ".join(f".param .u64 p{i}" for i in range(params)) + ")"
        }
        self.metadata = SimpleNamespace(**{"num_warps": 8, "shared": 4096, "num_ctas": 1, **meta})
        self.loaded = False

    def _init_handles(self) -> None:
        self.loaded = True


@pytest.mark.parametrize(
    "meta,least,ok",
    [
        ({}, 12, True),
        ({}, 13, False),  # fewer parameters than the launch passes
        ({"num_ctas": 2}, 0, False),  # a cluster launch
        ({"global_scratch_size": 64}, 0, False),  # Triton's scratch memory
        ({"profile_scratch_size": 8}, 0, False),
        ({"launch_cooperative_grid": True}, 0, False),
        ({"launch_pdl": True}, 0, False),
    ],
)
def test_a_kernel_is_handed_to_the_gate_only_where_cuLaunchKernel_launches_it(meta, least, ok):
    from opbench.kernels._lib.native_launch import launch_handle

    k = _Compiled(12, **meta)
    got = launch_handle(k, least)
    assert k.loaded  # loaded in the current context first
    assert got == ((0xBEEF, 8, 4096, 12) if ok else None)
