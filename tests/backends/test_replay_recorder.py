"""The recorder behind the C++ gate's launch replay (``opbench.backends.native.replay``),
on the CPU: what it makes of a call's launches and PyTorch calls, and what it refuses.

A launch is made here as Triton's launch paths make one: the compiled kernel's
``launch_metadata`` (which the recorder patches while it records), then the launch enter
hook with that metadata (which Triton's C launcher calls). The kernel is a stand-in with
the attributes of Triton's ``CompiledKernel`` that the recorder reads (its signature, its
PTX's parameters, its metadata): a real one needs a GPU to load, and
``tests/kernels/test_replay.py`` replays real kernels there.
"""

from __future__ import annotations

import struct
import threading
from types import SimpleNamespace
from typing import Any

import pytest
import torch

pytest.importorskip("triton")

from triton import knobs  # noqa: E402
from triton.compiler.compiler import CompiledKernel  # noqa: E402

from opbench.backends.native import replay  # noqa: E402
from opbench.backends.native.replay import (  # noqa: E402
    BUFFER,
    INPUT,
    KEPT,
    LAUNCH,
    NONE,
    RAW,
    TMAP,
    ZERO,
)

CODES = {torch.float32: 6, torch.float16: 5, torch.int32: 3}


class Kernel:
    """Stands in for a compiled Triton kernel: its signature, and what the loader a kernel
    declares reads of it (its parameter count, with Triton's two scratch pointers;
    ``launchable`` False for a launch the loader refuses, scratch memory say)."""

    def __init__(
        self, signature: dict[str, str], scratch: int = 2, launchable: bool = True
    ) -> None:
        self.src = SimpleNamespace(signature=signature)
        self.name = "k"
        self.function = 0xF00D
        self.params = sum(t != "constexpr" for t in signature.values()) + scratch
        self.launchable = launchable

    def _init_handles(self) -> None:
        pass


def loader(kernel: Kernel, least: int) -> tuple[int, int, int, int] | None:
    """The loader a kernel declares (``opbench.kernels._lib.native_launch.launch_handle``
    on a GPU; ``tests/kernels/test_native_params.py`` checks that one)."""
    if not kernel.launchable or kernel.params < least:
        return None
    return kernel.function, 4, 1024, kernel.params


SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "alpha": "fp32", "BLOCK": "constexpr"}


def launch(kernel: Kernel, grid: tuple[int, ...], *args: Any, made: bool = True) -> None:
    meta = CompiledKernel.launch_metadata(kernel, grid, 0, *args)
    if made:
        knobs.runtime.launch_enter_hook(meta)


def record(fn: Any, inputs: list[torch.Tensor], load: Any = loader) -> tuple:
    rec = replay.Recorder(CODES.__getitem__, load, device_type="cpu")
    rec.begin(inputs)
    try:
        out, same = fn()
    except BaseException:
        rec.abort()
        raise
    return rec.end(out, same)


def bits32(x: float) -> int:
    return int.from_bytes(struct.pack("<f", x), "little")


def test_a_call_becomes_buffers_launches_and_views():
    x = torch.randn(4, 8)
    k = Kernel(SIG)

    def fn():
        buf = torch.empty(32)
        launch(k, (2,), x[1:], buf, 32, 0.5, 128)
        return [buf.view(4, 8)[1:]], [-1]

    plan, why = record(fn, [x])
    assert why == ""
    buffers, steps, outputs, kept = plan
    assert kept == ()
    assert buffers == (((32,), (1,), CODES[torch.float32], False),)
    args = ((INPUT, 0, 8 * 4), (BUFFER, 0, 0), (RAW, 0, 32), (RAW, 0, bits32(0.5)))
    assert steps == ((LAUNCH, 0xF00D, 2, 1, 1, 4, 1024, args + ((RAW, 0, 0),) * 2),)
    assert outputs == ((BUFFER, 0, 8, (3, 8), (8, 1)),)


def test_a_buffer_returned_whole_is_allocated_in_the_outputs_shape():
    """``mean`` allocated flat and returned as ``[4, 1]``: the plan allocates ``[4, 1]``
    (no view made per replay); a buffer returned in part keeps its own shape."""
    x = torch.randn(4, 8)
    k = Kernel(SIG)

    def fn():
        mean, part = torch.empty(4), torch.empty(8)
        launch(k, (1,), x, mean, 4, 1.0, 128)
        launch(k, (1,), x, part, 8, 1.0, 128)
        return [mean.view(4, 1), part[2:]], [-1, -1]

    plan, why = record(fn, [x])
    assert why == ""
    assert [b[:2] for b in plan[0]] == [((4, 1), (1, 1)), ((8,), (1,))]
    assert plan[2] == ((BUFFER, 0, 0, (4, 1), (1, 1)), (BUFFER, 1, 2, (6,), (1,)))


def test_an_output_that_is_an_input_and_a_missing_one():
    x = torch.randn(16)
    k = Kernel(SIG)

    def fn():
        launch(k, (1,), x, x, 16, 1.0, 128)
        return [x, None], [0, -1]

    plan, why = record(fn, [x])
    assert why == "" and plan[2] == ((INPUT, 0, 0, (), ()), (NONE, 0, 0, (), ()))


def test_zeroed_buffers_and_zero_of_a_whole_buffer():
    x = torch.randn(16)
    k = Kernel(SIG)

    def fn():
        z = torch.zeros(16)
        e = torch.empty(16)
        e.zero_()
        launch(k, (1,), z, e, 16, 1.0, 128)
        return [e], [-1]

    plan, why = record(fn, [x])
    assert why == ""
    assert [b[3] for b in plan[0]] == [True, False]
    assert plan[1][0] == (ZERO, 1) and plan[1][1][0] == LAUNCH


@pytest.mark.parametrize(
    "name,body,reason",
    [
        ("a PyTorch kernel", lambda x, k: (torch.add(x, 1), None), "called aten.add.Tensor"),
        ("a value read on the host", lambda x, k: (x.sum().item(), None), "called aten.sum"),
        ("part of a buffer zeroed", lambda x, k: (torch.empty(16)[:8].zero_(), None), "zero_"),
        ("an address outside the call", lambda x, k: launch(k, (1,), _Stray.t, x, 4, 1.0, 128),
         "outside the call's tensors"),
        ("an address passed as an integer",
         lambda x, k: launch(Kernel({"p": "*fp32", "a": "i64"}), (1,), x, x.data_ptr() + 4),
         "an integer argument that is an address"),
        ("a half-precision number", lambda x, k: launch(Kernel({"p": "*fp32", "h": "fp16"}),
                                                        (1,), x, 1.0), "of type fp16"),
        ("a tensor descriptor without metadata",
         lambda x, k: launch(Kernel({"p": "*fp32", "d": "tensordesc<fp16[64]>"}), (1,), x, None),
         "a tensor descriptor without its metadata"),
        ("an im2col tensor descriptor",
         lambda x, k: launch(_desc_kernel(is_im2col=True), (1,), x, _Desc(x, [16], [1])),
         "not plainly tiled"),
        ("a tensor descriptor over a cache",
         lambda x, k: launch(_desc_kernel(), (1,), x, _Desc(_Stray.t, [64], [1])),
         "outside the call's tensors"),
        ("a launch the loader refuses", lambda x, k: launch(Kernel(SIG, launchable=False), (1,),
                                                            x, x, 4, 1.0, 128),
         "cuLaunchKernel does not make"),
        ("a signature that does not match", lambda x, k: launch(k, (1,), x, x), "signature"),
        ("a launch prepared and not made",
         lambda x, k: launch(k, (1,), x, x, 4, 1.0, 128, made=False), "not made"),
    ],
)  # fmt: skip
def test_what_the_recorder_refuses(name, body, reason):
    x = torch.randn(16)
    k = Kernel(SIG)

    def fn():
        body(x, k)
        launch(k, (1,), x, x, 16, 1.0, 128)
        return [x], [0]

    plan, why = record(fn, [x])
    assert plan is None and reason in why, (name, why)


def _native_launch() -> Any:
    """The kernels' launch helpers, imported in the test (tests/kernels/conftest.py sets
    the interpreter up before any kernel module loads)."""
    from opbench.kernels._lib import native_launch

    return native_launch


def _kept_loader(kernel: Kernel, least: int) -> tuple[int, int, int, int] | None:
    return loader(kernel, least)


_kept_loader.kept = lambda address: _native_launch().kept_scratch(address)  # type: ignore[attr-defined]


def test_scratch_the_kernel_keeps_is_addressed_as_kept():
    """A launch on scratch declared kept (``native_launch.keep_scratch``: a reduction's
    counters) is recorded against the plan's kept scratch, by its byte offset; the same
    launch through a loader that declares none is refused."""
    native_launch = _native_launch()
    x = torch.randn(16)
    k = Kernel(SIG)
    scratch = native_launch.keep_scratch(torch.zeros(64))
    other = native_launch.keep_scratch(torch.zeros(8, dtype=torch.int32))

    def fn():
        out = torch.empty(16)
        launch(k, (1,), scratch[4:], out, 16, 1.0, 128)
        launch(k, (1,), other, scratch, 16, 1.0, 128)
        return [out], [-1]

    plan, why = record(fn, [x], _kept_loader)
    assert why == ""
    assert plan[3] == (64 * 4, 8 * 4)
    assert plan[1][0][7][:2] == ((KEPT, 0, 16), (BUFFER, 0, 0))
    assert plan[1][1][7][:2] == ((KEPT, 1, 0), (KEPT, 0, 0))
    plan, why = record(fn, [x])
    assert plan is None and "outside the call's tensors" in why


def test_kept_scratch_is_forgotten_with_its_tensor():
    native_launch = _native_launch()
    scratch = native_launch.keep_scratch(torch.zeros(64))
    address = scratch.data_ptr()
    assert native_launch.kept_scratch(address + 4) == (address, address + 256)
    del scratch
    assert native_launch.kept_scratch(address + 4) is None


def test_an_address_of_kept_scratch_passed_as_an_integer_is_refused():
    x = torch.randn(16)
    scratch = _native_launch().keep_scratch(torch.zeros(64))

    def fn():
        launch(Kernel({"p": "*fp32", "a": "i64"}), (1,), x, scratch.data_ptr())
        return [x], [0]

    plan, why = record(fn, [x], _kept_loader)
    assert plan is None and "an integer argument that is an address" in why


class _Desc:
    """A host-side tensor descriptor as Triton's launcher reads one."""

    def __init__(self, base: torch.Tensor, shape: list[int], strides: list[int]) -> None:
        self.base, self.shape, self.strides, self.padding = base, shape, strides, "zero"


def _desc_kernel(block: tuple[int, ...] = (16,), **meta: Any) -> Kernel:
    """A kernel taking a pointer and a 1-D descriptor, with the metadata Triton's compiler
    writes for the descriptor; its PTX takes the map, the shape and the stride."""
    k = Kernel({"p": "*fp32", "d": f"tensordesc<fp32{list(block)}>"}, scratch=2 + 2 * len(block))
    k.metadata = SimpleNamespace(tensordesc_meta=[
        {"swizzle": 0, "elem_size": 4, "elem_type": 7, "block_size": list(block),
         "fp4_padded": False, **meta}])  # fmt: skip
    return k


def test_a_tensor_descriptor_is_encoded_again_over_the_calls_address():
    """A descriptor is recorded as its map's spec over the region its base lies in (an
    input here, at a byte offset), then its shape (32-bit) and strides (64-bit), as
    Triton's launcher expands it; the dtype is the driver's code for Triton's."""
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST

    x = torch.randn(8, 32)
    k = _desc_kernel(block=(4, 16))

    def fn():
        launch(k, (1,), x, _Desc(x[2:], [6, 32], [32, 1]))
        return [x], [0]

    plan, why = record(fn, [x])
    assert why == "", why
    args = plan[1][0][7]
    spec = (INPUT, 0, TMA_DTYPE_DEVICE_TO_HOST[7], 4, 0, 0, (4, 16), (6, 32), (32, 1))
    assert args[:2] == ((INPUT, 0, 0), (TMAP, 0, 2 * 32 * 4, spec))
    assert args[2:6] == ((RAW, 0, 6), (RAW, 0, 32), (RAW, 0, 32), (RAW, 0, 1))
    assert args[6:] == ((RAW, 0, 0),) * 2  # Triton's scratch pointers


class _Stray:
    """A tensor kept between calls (a cache): not one of the call's tensors."""

    t = torch.randn(64)


def test_an_output_that_is_not_the_calls():
    x = torch.randn(16)
    k = Kernel(SIG)

    def fn():
        launch(k, (1,), x, x, 16, 1.0, 128)
        return [_Stray.t], [-1]

    plan, why = record(fn, [x])
    assert plan is None and "neither an input nor a buffer" in why


def test_recording_leaves_triton_as_it_found_it():
    original = CompiledKernel.launch_metadata
    hooks = list(knobs.runtime.launch_enter_hook.calls)
    x = torch.randn(4)
    record(lambda: ([x], [0]), [x])
    assert CompiledKernel.launch_metadata is original
    assert knobs.runtime.launch_enter_hook.calls == hooks

    def raises():
        raise RuntimeError("the function failed")

    with pytest.raises(RuntimeError):
        record(raises, [x])
    assert CompiledKernel.launch_metadata is original
    assert knobs.runtime.launch_enter_hook.calls == hooks


def test_no_launch_is_nothing_to_replay():
    x = torch.randn(4)
    plan, why = record(lambda: ([x], [0]), [x])
    assert plan is None and why == "no launch"


@pytest.mark.parametrize(
    "ty,value,bits",
    [
        ("i32", -1, 0xFFFFFFFF),
        ("i64", -2, (1 << 64) - 2),
        ("u1", 1, 1),
        ("fp32", 0.5, 0x3F000000),
        ("fp64", -2.0, int.from_bytes(struct.pack("<d", -2.0), "little")),
        ("fp16", 1.0, None),
    ],
)
def test_scalar_arguments_are_packed_as_the_launcher_packs_them(ty, value, bits):
    assert replay.raw_bits(ty, value) == bits


def test_an_operator_recorded_inside_another_leaves_the_outer_unrepeatable():
    """The outer call ran an operator (which recorded its own launches): the outer
    recording is refused, the inner one holds only its launch."""
    x = torch.randn(16)
    k = Kernel(SIG)
    inner: dict[str, Any] = {}

    def outer():
        launch(k, (1,), x, x, 16, 1.0, 128)

        def inner_fn():
            launch(k, (2,), x, x, 16, 1.0, 128)
            return [x], [0]

        inner["plan"] = record(inner_fn, [x])
        return [x], [0]

    plan, why = record(outer, [x])
    assert plan is None and "recorded inside" in why
    inner_plan, inner_why = inner["plan"]
    assert inner_why == "" and [s[2] for s in inner_plan[1]] == [2]


def test_two_threads_record_their_own_launches():
    """Recordings on two threads at once: each holds its own thread's launches, and
    Triton is as it was once both are done."""
    original = CompiledKernel.launch_metadata
    barrier = threading.Barrier(2)
    plans: dict[int, tuple] = {}

    def worker(grid: int) -> None:
        x = torch.randn(16)
        k = Kernel(SIG)

        def fn():
            for _ in range(3):
                barrier.wait()
                launch(k, (grid,), x, x, 16, 1.0, 128)
            return [x], [0]

        plans[grid] = record(fn, [x])

    threads = [threading.Thread(target=worker, args=(g,)) for g in (5, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for grid in (5, 7):
        plan, why = plans[grid]
        assert why == "" and [s[2] for s in plan[1]] == [grid] * 3
    assert CompiledKernel.launch_metadata is original
    assert not any("Taps" in repr(h) for h in knobs.runtime.launch_enter_hook.calls)
