"""The launch path's assumptions about our kernels, checked without a GPU."""

import json
import os
import subprocess
import sys

import pytest
import triton.language as tl

from opbench.kernels._lib.pointwise import I32_SAFE, index_type

_SIGNATURES = r"""
import importlib, json, pkgutil
import opbench.kernels._lib as lib
from opbench.kernels._lib.launch import Launcher
out = {}
for m in pkgutil.iter_modules(lib.__path__):
    mod = importlib.import_module(f"opbench.kernels._lib.{m.name}")
    for name, v in vars(mod).items():
        if isinstance(v, Launcher):
            params = v.fn.params
            out[f"{m.name}.{name}"] = {
                "ptrs": [params[i].name for i in v._ptrs],
                "runtime": [p.name for p in params if not p.is_constexpr],
            }
print(json.dumps(out))
"""


@pytest.mark.slow  # a fresh process imports every kernel: 2.2-3.6 s (2026-11-28, --durations)
def test_every_launcher_finds_exactly_the_pointer_parameters() -> None:
    """The Launcher keys its cache on the tensors at the unannotated parameters; a kernel
    whose integer parameter lost its annotation would put an int there (caught at
    compile time on the GPU), and a pointer given an annotation would drop a tensor from
    the key (a stale kernel for another dtype). Our kernels name pointers ``*_ptr``."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNATURES], env=env, capture_output=True, text=True, check=True
    )
    launchers = json.loads(proc.stdout)
    assert len(launchers) >= 15
    for name, sig in launchers.items():
        expected = [p for p in sig["runtime"] if p.endswith("_ptr")]
        assert sig["ptrs"] == expected, name
        assert sig["ptrs"], name


def test_index_type_is_int32_only_while_every_offset_fits() -> None:
    assert index_type(1024, [1, 1, 32, 32], [[0, 0, 32, 1]]) == tl.int32
    assert index_type(I32_SAFE + 1, [1, 1, 1, I32_SAFE + 1], [[0, 0, 0, 1]]) == tl.int64
    # few elements, but a broadcast operand's stride reaches past 2**31
    assert index_type(4, [1, 1, 2, 2], [[0, 0, 2**31, 1], [0, 0, 2, 1]]) == tl.int64
    # stride 0 (broadcast) adds nothing
    assert index_type(2**20, [1, 1, 2**10, 2**10], [[0, 0, 0, 1]]) == tl.int32


def test_no_kernel_module_holds_a_nan_global() -> None:
    """Compiled Triton re-checks the globals a kernel read on every ``kernel[grid]`` call
    by ``!=``; a NaN global never equals itself, so the second compile of such a kernel
    raised "Global variable _NAN has changed" on the H100 (the interpreter never checks)."""
    import importlib
    import pkgutil

    import opbench.kernels._lib as lib

    for m in pkgutil.iter_modules(lib.__path__):
        mod = importlib.import_module(f"opbench.kernels._lib.{m.name}")
        for name, v in vars(mod).items():
            value = v.value if isinstance(v, tl.constexpr) else v
            assert not (isinstance(value, float) and value != value), f"{m.name}.{name}"


@pytest.mark.slow  # a fresh process imports every kernel: 2.2-3.6 s (2026-11-28, --durations)
def test_every_launched_kernel_specializes_only_what_its_launcher_keys() -> None:
    """A :class:`Launcher` reuses the kernel Triton compiled for the first call, keyed on
    pointers and constexprs (and the integers it is told to key): an integer Triton
    specialized on (divisible by 16, == 1) but the launcher does not key would serve a
    later call with another value a kernel compiled for the first one. So every integer
    parameter of every launched kernel is ``do_not_specialize`` or keyed. Checked on the
    compiled-mode objects (the interpreter has no specialization), in a fresh process."""
    code = """
import importlib, pkgutil, triton
import opbench.kernels._lib as lib
from opbench.kernels._lib.launch import Launcher
bad, seen = [], 0
for m in pkgutil.iter_modules(lib.__path__):
    mod = importlib.import_module(f"opbench.kernels._lib.{m.name}")
    for launcher in (v for v in vars(mod).values() if isinstance(v, Launcher)):
        seen += 1
        params = launcher.fn.params
        keyed = {params[i].name for i in launcher._int_keys}
        bad += [f"{m.name}.{launcher.fn.__name__}: {p.name}" for p in params
                if p.annotation in ("i64", "i32", "u64") and not p.do_not_specialize
                and p.name not in keyed]
assert seen >= 20, seen
assert not bad, bad
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]


def test_the_direct_launch_computes_what_the_ordinary_launch_does() -> None:
    """On a GPU with Triton 3.6 a :class:`Launcher` hit calls Triton's C launcher itself,
    with the tensors' addresses in place of the tensors (:func:`launch._direct`): the
    argument order is read from 3.6's source, so a mistake shows up only compiled. The
    same kernel, launched both ways on a strided broadcast add, must write the same bytes,
    and the direct path must be the one taken (3.6) or not offered (other versions)."""
    import pytest
    import torch
    import triton
    from kernel_checks import DEVICE

    from opbench.kernels._lib import arithmetic, launch, pointwise

    if not DEVICE.startswith("cuda"):
        pytest.skip("compiled launches need a GPU (OPBENCH_KERNEL_DEVICE=cuda)")
    a = torch.randn(64, 33, device=DEVICE, dtype=torch.float16)[:, 1:]
    b = torch.randn(32, device=DEVICE, dtype=torch.float16)
    first = arithmetic.add(a, b)  # compiles: every later call is a cache hit
    direct = arithmetic.add(a, b)
    offered = [
        hit[3] is not None
        for v in vars(pointwise).values()
        if isinstance(v, launch.Launcher)
        for hit in v._compiled.values()
    ]
    assert any(offered) == triton.__version__.startswith(launch._DIRECT_VERSIONS)
    for v in vars(pointwise).values():
        if isinstance(v, launch.Launcher):  # the same compiled kernels, ordinary launches
            v._compiled = {k: (*h[:3], None) for k, h in v._compiled.items()}
    ordinary = arithmetic.add(a, b)
    torch.testing.assert_close(direct, a + b)
    assert torch.equal(direct, ordinary) and torch.equal(direct, first)


def test_the_direct_launches_take_only_kernels_without_scratch_memory() -> None:
    """Both direct launches (the Launcher's and the lanes') pass None for the two scratch
    buffers, so :func:`launch.launch_head` must refuse a kernel that needs either (it
    would write through a null pointer), and otherwise give the cooperative and PDL
    flags as the C launcher takes them."""
    from types import SimpleNamespace

    from opbench.kernels._lib.launch import launch_head

    md = SimpleNamespace(global_scratch_size=0, profile_scratch_size=0,
                         launch_cooperative_grid=False, launch_pdl=True)  # fmt: skip
    assert launch_head(md) == (0, 1, None, None)
    assert launch_head(SimpleNamespace(**{**vars(md), "global_scratch_size": 256})) is None
    assert launch_head(SimpleNamespace(**{**vars(md), "profile_scratch_size": 8})) is None
    # a metadata object that does not say (another Triton) is refused too
    assert launch_head(SimpleNamespace(launch_cooperative_grid=0, launch_pdl=0)) is None
