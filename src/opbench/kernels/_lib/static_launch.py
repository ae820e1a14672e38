"""Launching a compiled Triton kernel through PyTorch's static CUDA launcher.

``CompiledKernel.run`` costs about 6 µs a call on the H100 host even with every argument
precomputed (``benchmarks/launch_profile.py``): Triton's generated C launcher calls back
into Python for every pointer's ``data_ptr()``, builds launch metadata and looks up hook
chains. Inductor launches the same cubins through ``torch._C._StaticCudaLauncher``, a
launcher compiled into PyTorch that reads a tensor's address in C++ and takes every
argument's C type from a one-letter-per-argument string computed once. Eager models pay
the launch on every op, so this is where a reference backend's host time goes.

:func:`static_runner` turns one ``CompiledKernel`` into ``run(gx, gy, gz, stream, args)``
(``args``: the kernel's runtime arguments, constexprs excluded, in signature order) or
returns None when this PyTorch or this kernel cannot take that path (no CUDA build, a
ROCm or XPU device, launch hooks installed, a kernel with a cluster, global or profile
scratch in use); the caller then keeps Triton's own launcher. ``OPBENCH_TRITON_LAUNCH=
triton`` turns the static path off (for comparing the two, or if a PyTorch release
changes the launcher's interface).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["static_runner"]

#: Triton's scalar type names -> the static launcher's argument codes (Inductor's table,
#: ``StaticallyLaunchedTritonKernel.type_mappings``). Pointers are "O" (a tensor).
_CODES = {
    "i1": "i", "i8": "b", "i16": "h", "i32": "i", "i64": "l",
    "u1": "I", "u8": "B", "u16": "H", "u32": "I", "u64": "K",
    "fp16": "f", "bf16": "f", "fp32": "f", "f32": "f", "fp64": "d",
}  # fmt: skip

_CUBIN_DIR: Path | None = None


def enabled() -> bool:
    return os.environ.get("OPBENCH_TRITON_LAUNCH", "static") != "triton"


def _launcher_impl() -> Any:
    try:
        from torch._C import _StaticCudaLauncher  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _StaticCudaLauncher


def _cubin_file(compiled: Any) -> Path:
    """The kernel's cubin on disk (the launcher loads it by path): written once per
    process into a private temporary folder, named by the kernel's hash."""
    global _CUBIN_DIR
    if _CUBIN_DIR is None:
        _CUBIN_DIR = Path(tempfile.mkdtemp(prefix="opbench-cubin-"))
    path = _CUBIN_DIR / f"{compiled.hash}.cubin"
    if not path.exists():
        path.write_bytes(compiled.asm["cubin"])
    return path


def _arg_codes(compiled: Any, n_runtime: int) -> tuple[str, tuple[int, ...]] | None:
    """The argument-code string and the positions (among the ``n_runtime`` runtime
    arguments) the compiled kernel still takes: Triton turns an integer equal to 1 into
    a constant, and the cubin then has no parameter for it."""
    src = compiled.src
    names = list(src.fn.arg_names)

    def position(key: Any) -> int:
        if isinstance(key, str):
            return names.index(key)
        if isinstance(key, tuple):
            return key[0]
        return int(key)

    signature = {position(k): v for k, v in src.signature.items()}
    constants = {position(k) for k in getattr(src, "constants", {})}
    codes: list[str] = []
    keep: list[int] = []
    for i in sorted(signature):
        ty = signature[i]
        if ty == "constexpr" or i in constants:
            continue
        if i >= n_runtime:
            return None  # a constexpr parameter Triton did not mark as one
        if ty.startswith("*"):
            codes.append("O")
        elif ty in _CODES:
            codes.append(_CODES[ty])
        else:
            return None  # tensor descriptors and the like
        keep.append(i)
    return "".join(codes), tuple(keep)


def _hooks_empty() -> bool:
    import triton

    knobs = getattr(triton, "knobs", None)
    if knobs is None:
        return False
    for hook in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return False
    return True


def static_runner(
    compiled: Any, n_runtime: int, device: int
) -> Callable[[int, int, int, int, tuple[Any, ...]], None] | None:
    """A direct launcher for ``compiled`` on CUDA device ``device``, or None (see the
    module docstring). ``n_runtime``: how many runtime arguments the caller passes."""
    if not enabled():
        return None
    impl = _launcher_impl()
    if impl is None or "cubin" not in getattr(compiled, "asm", {}) or not _hooks_empty():
        return None
    md = compiled.metadata
    if getattr(md, "num_ctas", 1) != 1 or tuple(getattr(md, "cluster_dims", (1, 1, 1))) not in (
        (1, 1, 1),
        (),
    ):
        return None
    scratch = 0
    for name in ("global_scratch_size", "profile_scratch_size"):
        if hasattr(md, name):
            if getattr(md, name) > 0:
                return None
            scratch += 1  # the parameter exists and the launcher passes a null pointer
    if getattr(md, "launch_cooperative_grid", False) or getattr(md, "launch_pdl", False):
        return None
    parsed = _arg_codes(compiled, n_runtime)
    if parsed is None:
        return None
    codes, keep = parsed
    codes += "O" * scratch
    tail = (None,) * scratch
    shared = compiled.shared if hasattr(compiled, "shared") else md.shared
    loaded = impl._load_kernel(str(_cubin_file(compiled)), md.name, shared, device)
    function = loaded[1] if len(loaded) == 4 else loaded[0]  # (module,) function, regs, spills
    module_handle = loaded[0] if len(loaded) == 4 else None
    warps = md.num_warps
    launch = impl._launch_kernel
    every = keep == tuple(range(n_runtime))

    def run(gx: int, gy: int, gz: int, stream: int, args: tuple[Any, ...]) -> None:
        if not every:
            args = tuple(args[i] for i in keep)
        launch(function, gx, gy, gz, warps, shared, codes, (*args, *tail), stream)

    run.module_handle = module_handle  # type: ignore[attr-defined]  # keeps it referenced
    return run
