"""The C++ gate's native launches on a GPU (``opbench.backends.native``): every op that
declares one gives the same bits as the Python path it stands in for, and eager's values
within tolerance; calls it cannot take go to Python; the launches capture in a CUDA graph.

CUDA only (the native path launches compiled kernels): run with
``OPBENCH_KERNEL_DEVICE=cuda python3 -m pytest tests/kernels/test_native_launch.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from opbench.backends import registry
from opbench.backends.loader import load_backend, reference_kernels_folder
from opbench.backends.native import gate_module, unavailable_reason

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="native launches need CUDA")

DTYPES = [torch.float16, torch.bfloat16, torch.float32]
EAGER_TOLERANCE = {torch.float16: 2e-2, torch.bfloat16: 5e-2, torch.float32: 1e-5}
SHAPES = [(1,), (17,), (128,), (1000,), (3, 5, 7), (64, 1024), ((1 << 20) + 3,)]


def _gelu_backward(g: torch.Tensor, x: torch.Tensor, approximate: str) -> torch.Tensor:
    return torch.ops.aten.gelu_backward(g, x, approximate=approximate)


#: (overload, call, operands): operands 2 draws a second tensor of the same shape
CASES: list[tuple[str, Callable[..., Any], int]] = [
    ("add.Tensor", lambda a, b: torch.add(a, b), 2),
    ("add.Tensor", lambda a, b: torch.add(a, b, alpha=-2.5), 2),
    ("sub.Tensor", lambda a, b: torch.sub(a, b), 2),
    ("mul.Tensor", lambda a, b: torch.mul(a, b), 2),
    ("mul.Tensor", lambda a: a * 0.5, 1),  # a wrapped number: a 0-dim CPU tensor
    ("div.Tensor", lambda a, b: torch.div(a, b), 2),
    ("add_.Tensor", lambda a, b: a.add_(b), 2),
    ("mul_.Tensor", lambda a, b: a.mul_(b), 2),
    ("relu.default", lambda a: torch.relu(a), 1),
    ("relu_.default", lambda a: torch.relu_(a), 1),
    ("gelu.default", lambda a: torch.nn.functional.gelu(a), 1),
    ("gelu.default", lambda a: torch.nn.functional.gelu(a, approximate="tanh"), 1),
    ("sigmoid.default", lambda a: torch.sigmoid(a), 1),
    ("tanh.default", lambda a: torch.tanh(a), 1),
    ("silu.default", lambda a: torch.nn.functional.silu(a), 1),
    ("neg.default", lambda a: torch.neg(a), 1),
    ("threshold_backward.default", lambda g, x: torch.ops.aten.threshold_backward(g, x, 0.1), 2),
    ("tanh_backward.default", lambda g, y: torch.ops.aten.tanh_backward(g, y), 2),
    ("sigmoid_backward.default", lambda g, y: torch.ops.aten.sigmoid_backward(g, y), 2),
    ("silu_backward.default", lambda g, x: torch.ops.aten.silu_backward(g, x), 2),
    ("gelu_backward.default", lambda g, x: _gelu_backward(g, x, "none"), 2),
    ("gelu_backward.default", lambda g, x: _gelu_backward(g, x, "tanh"), 2),
    ("rsub.Scalar", lambda a: torch.rsub(a, 2.0, alpha=0.5), 1),
    ("hardtanh.default", lambda a: torch.nn.functional.hardtanh(a, -2.0, 0.5), 1),
    ("hardtanh_.default", lambda a: torch.ops.aten.hardtanh_(a), 1),
    ("hardtanh_backward.default", lambda g, x: torch.ops.aten.hardtanh_backward(g, x, 0.5, 3), 2),
    ("hardsigmoid.default", lambda a: torch.ops.aten.hardsigmoid(a), 1),
    ("hardsigmoid_.default", lambda a: torch.ops.aten.hardsigmoid_(a), 1),
    ("hardsigmoid_backward.default", lambda g, x: torch.ops.aten.hardsigmoid_backward(g, x), 2),
    ("hardswish.default", lambda a: torch.ops.aten.hardswish(a), 1),
    ("hardswish_.default", lambda a: torch.ops.aten.hardswish_(a), 1),
    ("hardswish_backward.default", lambda g, x: torch.ops.aten.hardswish_backward(g, x), 2),
    ("leaky_relu.default", lambda a: torch.ops.aten.leaky_relu(a, 0.2), 1),
    ("leaky_relu_.default", lambda a: torch.ops.aten.leaky_relu_(a), 1),
    ("exp.default", lambda a: torch.exp(a), 1),
    ("exp_.default", lambda a: torch.exp_(a), 1),
    ("sqrt.default", lambda a: torch.sqrt(a), 1),
    ("rsqrt.default", lambda a: torch.rsqrt(a), 1),
    ("rsqrt_.default", lambda a: torch.rsqrt_(a), 1),
    ("reciprocal.default", lambda a: torch.reciprocal(a), 1),
    ("clone.default", lambda a: torch.clone(a), 1),
    ("silu_.default", lambda a: torch.nn.functional.silu(a, inplace=True), 1),
    ("minimum.default", lambda a, b: torch.minimum(a, b), 2),
    ("maximum.default", lambda a, b: torch.maximum(a, b), 2),
    ("clamp.default", lambda a: torch.clamp(a, -1.5, 2), 1),
    ("clamp_.default", lambda a: torch.clamp_(a, -1, 0.5), 1),
    (
        "leaky_relu_backward.default",
        lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.1, False),
        2,
    ),
    (
        "leaky_relu_backward.default",
        lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.01, True),
        2,
    ),
    ("copy_.default", lambda a, b: a.copy_(b), 2),
    ("masked_fill.Scalar", lambda a, b: torch.masked_fill(a, b > 1.0, -1000.0), 2),
    ("masked_fill.Scalar", lambda a, b: torch.masked_fill(a, b > 1.0, float("-inf")), 2),
    ("masked_fill_.Scalar", lambda a, b: a.masked_fill_(b > 1.0, 0.5), 2),
    # the exponent picks the kernel (CUDA eager's special cases, else powf)
    ("pow.Tensor_Scalar", lambda a: torch.pow(a, 3.0), 1),
    ("pow.Tensor_Scalar", lambda a: torch.pow(a, 2), 1),
    ("pow.Tensor_Scalar", lambda a: torch.pow(a, 0.5), 1),
    ("pow.Tensor_Scalar", lambda a: torch.pow(a, -2.0), 1),
    ("pow.Tensor_Scalar", lambda a: torch.pow(a, 0), 1),
    ("pow.Tensor_Scalar", lambda a: torch.pow(a, 1.7), 1),
    ("pow.Tensor_Scalar", lambda a: torch.pow(a, 3.3), 1),  # rounded to 16 bits first
    ("pow_.Scalar", lambda a: a.pow_(-0.5), 1),
    ("pow_.Scalar", lambda a: a.pow_(2.5), 1),
]


@pytest.fixture(scope="module")
def backend() -> Any:
    mp = pytest.MonkeyPatch()
    mp.setenv("OPBENCH_NATIVE", "1")  # tests/conftest.py turns it off for the other tests
    if gate_module() is None:
        pytest.fail(f"the C++ gate is not available: {unavailable_reason()}")
    yield load_backend(str(reference_kernels_folder()), "cuda")
    mp.undo()


def _inputs(shape: tuple[int, ...], dtype: torch.dtype, k: int) -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(hash((shape, k)) & 0xFFFF)
    out = []
    for i in range(k):
        t = torch.randn(shape, device="cuda", dtype=torch.float32, generator=g) * 3
        if i == 1:
            t = t.abs() + 0.25  # a divisor away from 0
        out.append(t.to(dtype))
    if out[0].numel() > 4:  # the values every op must carry through
        flat = out[0].view(-1)
        flat[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0])
    return out


def _run(backend: Any, op: str, call: Callable[..., Any], args: list[torch.Tensor],
         native: bool, copy: bool = True) -> tuple[torch.Tensor, dict[str, int]]:  # fmt: skip
    if copy:  # clone() would realign a misaligned view
        args = [a.clone() for a in args]
    with registry.backend(backend, "cuda", ops=[op], native=native):
        registry.reset_counts()
        out = call(*args)
        torch.cuda.synchronize()
        counts = registry.call_counts()[op]
    if op.split(".")[0].endswith("_"):
        assert out is args[0], "an in-place op returns self"
    return out, counts


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_native_launch_matches_the_python_path_and_eager(backend, case, shape, dtype):
    op, call, k = CASES[case]
    args = _inputs(shape, dtype, k)
    native, counts = _run(backend, op, call, args, native=True)
    assert counts.get("native") == 1, f"{op} did not take the native path: {counts}"
    python, counts = _run(backend, op, call, args, native=False)
    assert counts["served"] == 1 and "native" not in counts
    torch.testing.assert_close(native, python, rtol=0, atol=0, equal_nan=True)
    # eager within the judge's bounds for the dtype: the Python path's own verdicts (a
    # 16-bit tanh_backward near |y| = 1 differs from eager's by an FMA's rounding)
    expected = call(*[a.clone() for a in args])
    tol = EAGER_TOLERANCE[dtype]
    torch.testing.assert_close(native, expected, equal_nan=True, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "name,make",
    [
        ("transposed", lambda a, b: (a.t(), b.t())),
        ("transposed other", lambda a, b: (a, b.t().contiguous().t())),
        ("misaligned", lambda a, b: (a.view(-1)[1:], b.view(-1)[1:])),
        ("mixed dtypes", lambda a, b: (a, b.float())),
        ("mixed dtypes broadcast", lambda a, b: (a, b[:1].float())),
        ("an empty broadcast result", lambda a, b: (a[:1], b[:0])),
    ],
)
def test_calls_the_native_path_cannot_take_go_to_python(backend, name, make):
    a, b = make(*_inputs((64, 32), torch.float16, 2))
    native, counts = _run(backend, "add.Tensor", torch.add, [a, b], native=True, copy=False)
    assert counts.get("native") == 0 and counts["served"] == 1, counts
    torch.testing.assert_close(native, torch.add(a, b), equal_nan=True)


#: (name, make(dtype, operands, seed) -> the call's tensors): broadcast and sliced calls
#: the strided launch takes, as the traced models make them
STRIDED_LAYOUTS: list[tuple[str, Callable[[torch.dtype, int, int], list[torch.Tensor]]]] = []


def _values(shape: tuple[int, ...], dtype: torch.dtype, seed: int, divisor: bool) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(seed)
    t = torch.randn(shape, device="cuda", dtype=torch.float32, generator=g) * 3
    if divisor:
        t = t.abs() + 0.25
    elif t.numel() > 4:
        t.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0])
    return t.to(dtype)


def _layout(name: str, make: Callable[[torch.dtype, int, int], list[torch.Tensor]]) -> None:
    STRIDED_LAYOUTS.append((name, make))


_layout("row [64, 96] / [64, 1]", lambda d, k, s: [
    _values((64, 96), d, s, False), _values((64, 1), d, s + 1, True)][:k])  # fmt: skip
_layout("bias [8, 33, 96] + [96]", lambda d, k, s: [
    _values((8, 33, 96), d, s, False), _values((96,), d, s + 1, True)][:k])  # fmt: skip
_layout("sliced [64, 96][:, :80]", lambda d, k, s: [
    _values((64, 96), d, s, False)[:, :80], _values((64, 96), d, s + 1, True)[:, :80]][:k])  # fmt: skip
_layout("a column [4000, 4][:, 0]", lambda d, k, s: [
    _values((4000, 4), d, s, False)[:, 0], _values((4000, 4), d, s + 1, True)[:, 0]][:k])  # fmt: skip
_layout("sliced self, broadcast other", lambda d, k, s: [
    _values((3, 40, 24), d, s, False)[:, :, 8:], _values((3, 1, 16), d, s + 1, True)][:k])  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("layout", range(len(STRIDED_LAYOUTS)), ids=[n for n, _ in STRIDED_LAYOUTS])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_broadcast_and_sliced_calls_take_the_strided_launch(backend, case, layout, dtype):
    """Same bits as the Python path, eager's values and eager's layout; ``clone`` (whose
    result keeps a strided input's layout) and calls whose layout needs none go to Python."""
    op, call, k = CASES[case]
    name, make = STRIDED_LAYOUTS[layout]
    if k == 1 and (name.startswith("row") or name.startswith("bias")):
        pytest.skip("one operand: nothing broadcasts")
    native, counts = _run(backend, op, call, make(dtype, k, 11), native=True, copy=False)
    want_native = 0 if op == "clone.default" else 1
    assert counts.get("native") == want_native, f"{op} on {name}: {counts}"
    python, counts = _run(backend, op, call, make(dtype, k, 11), native=False, copy=False)
    torch.testing.assert_close(native, python, rtol=0, atol=0, equal_nan=True)
    expected = call(*make(dtype, k, 11))
    tol = EAGER_TOLERANCE[dtype]
    torch.testing.assert_close(native, expected, equal_nan=True, rtol=tol, atol=tol)
    assert native.stride() == expected.stride(), (native.stride(), expected.stride())


@pytest.mark.parametrize("op,call", [
    ("add.Tensor", lambda a, b: torch.add(a, b)),
    ("minimum.default", lambda a, b: torch.minimum(a, b)),
    ("add_.Tensor", lambda a, b: a.add_(b)),
    ("copy_.default", lambda a, b: a.copy_(b)),
])  # fmt: skip
@pytest.mark.parametrize("b_shape", [(64, 96), (96,)])
def test_a_narrower_other_is_launched_in_selfs_dtype(backend, op, call, b_shape):
    """f32 activations and an f16 operand (same shape, or a broadcast bias): the result
    is f32, as the gate's output is; the other way round goes to Python (the cases above)."""
    make = lambda: [_values((64, 96), torch.float32, 3, False),  # noqa: E731
                    _values(b_shape, torch.float16, 4, True)]  # fmt: skip
    native, counts = _run(backend, op, call, make(), native=True, copy=False)
    assert counts.get("native") == 1, counts
    assert native.dtype == torch.float32
    python, _ = _run(backend, op, call, make(), native=False, copy=False)
    torch.testing.assert_close(native, python, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(native, call(*make()), rtol=0, atol=0, equal_nan=True)
    # the other way round (an f16 self, an f32 other) widens the result, or narrows a copy
    wide = [t.to(torch.float16 if t.dtype == torch.float32 else torch.float32) for t in make()]
    _, counts = _run(backend, op, call, wide, native=True, copy=False)
    assert counts.get("native") == 0, counts


def test_a_clone_with_a_memory_format_goes_to_python(backend):
    (a,) = _inputs((8, 16, 4, 4), torch.float16, 1)
    call = lambda x: torch.clone(x, memory_format=torch.channels_last)  # noqa: E731
    out, counts = _run(backend, "clone.default", call, [a], native=True)
    assert counts.get("native") == 0 and counts["served"] == 1, counts
    assert out.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out, a, rtol=0, atol=0, equal_nan=True)


def test_a_0dim_cuda_tensor_and_a_cpu_scalar_tensor(backend):
    a = _inputs((1000,), torch.bfloat16, 1)[0]
    for other in (torch.tensor(1.5, device="cuda"), torch.tensor(3, dtype=torch.int64)):
        native, counts = _run(backend, "mul.Tensor", torch.mul, [a, other], native=True)
        assert counts.get("native") == 1
        assert native.dtype == torch.bfloat16
        python, _ = _run(backend, "mul.Tensor", torch.mul, [a, other], native=False)
        torch.testing.assert_close(native, python, rtol=0, atol=0, equal_nan=True)


#: (overload, call, operands) of the declarations that take integer tensors too
INT_CASES: list[tuple[str, Callable[..., Any], int]] = [
    ("clamp.default", lambda a: torch.clamp(a, 3, 200), 1),
    ("clamp_.default", lambda a: a.clamp_(min=17, max=199), 1),
    ("add.Tensor", lambda a, b: torch.add(a, b, alpha=3), 2),
    ("add.Tensor", lambda a: a + 7, 1),  # a wrapped int: a 0-dim int64 CPU tensor
    ("add_.Tensor", lambda a, b: a.add_(b), 2),
    ("sub.Tensor", lambda a, b: torch.sub(a, b), 2),
    ("mul.Tensor", lambda a, b: torch.mul(a, b), 2),
    ("mul.Scalar", lambda a: torch.ops.aten.mul.Scalar(a, 3), 1),
    ("mul_.Tensor", lambda a, b: a.mul_(b), 2),
    ("rsub.Scalar", lambda a: torch.rsub(a, 2, alpha=2), 1),
    ("neg.default", lambda a: torch.neg(a), 1),
    ("clone.default", lambda a: torch.clone(a), 1),
    ("minimum.default", lambda a, b: torch.minimum(a, b), 2),
    ("maximum.default", lambda a, b: torch.maximum(a, b), 2),
]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("shape", [(1,), (2,), (1000,), ((1 << 16) + 5,)])
@pytest.mark.parametrize("case", range(len(INT_CASES)))
def test_integer_tensors_take_the_native_path_with_integer_numbers(backend, case, shape, dtype):
    op, call, k = INT_CASES[case]
    g = torch.Generator(device="cuda").manual_seed(7)
    args = [torch.randint(0, 250, shape, device="cuda", generator=g).to(dtype) for _ in range(k)]
    native, counts = _run(backend, op, call, args, native=True)
    assert counts.get("native") == 1, f"{op} on {dtype} did not take the native path: {counts}"
    assert native.dtype == dtype
    python, _ = _run(backend, op, call, args, native=False)
    torch.testing.assert_close(native, python, rtol=0, atol=0)
    torch.testing.assert_close(native, call(*[a.clone() for a in args]), rtol=0, atol=0)


@pytest.mark.parametrize(
    "name,call",
    [
        ("a float bound promotes", lambda x: torch.clamp(x, 0.5, 512)),
        ("one bound", lambda x: torch.clamp(x, max=512)),
        ("a bound past float64's integers", lambda x: torch.clamp(x, 0, 2**60)),
        ("mul by a float promotes", lambda x: x * 0.5),
        ("mul by a floating 0-dim tensor promotes", lambda x: x * torch.tensor(2.0, device="cuda")),
    ],
)
def test_integer_calls_the_native_path_cannot_take_go_to_python(backend, name, call):
    a = torch.arange(-600, 600, device="cuda", dtype=torch.int64)
    op = "mul.Tensor" if name.startswith("mul") else "clamp.default"
    out, counts = _run(backend, op, call, [a], native=True)
    assert counts.get("native") == 0, counts
    torch.testing.assert_close(out, call(a.clone()), rtol=0, atol=0)


@pytest.mark.parametrize("op,call,dtype,error", [
    # an in-place leaky_relu_'s backward with a negative slope (is_result_arg)
    ("leaky_relu_backward.default",
     lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, -0.1, True), torch.float32,
     "In-place leakyReLu backward"),
    # a fill value past float16 (fill_value)
    ("masked_fill.Scalar", lambda a, b: torch.masked_fill(a, b > 1.0, 1e6), torch.float16,
     "without overflow"),
])  # fmt: skip
def test_calls_eager_refuses_go_to_python_which_raises_its_error(backend, op, call, dtype, error):
    args = _inputs((1000,), dtype, 2)
    with pytest.raises(RuntimeError, match=error):
        call(*args)  # eager's own words first
    with registry.backend(backend, "cuda", ops=[op]):
        registry.reset_counts()
        with pytest.raises(RuntimeError, match=error):
            call(*args)
        assert registry.call_counts()[op].get("native") == 0


def test_native_launches_capture_in_a_cuda_graph(backend):
    a, b = _inputs((4096,), torch.float16, 2)
    with registry.backend(backend, "cuda", ops=["add.Tensor", "relu.default"]):
        f = lambda: torch.relu(torch.add(a, b))  # noqa: E731
        f()  # compile the variants before capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = f()
        a.copy_(torch.randn_like(a))
        graph.replay()
        torch.cuda.synchronize()
        counts = registry.call_counts()
    assert counts["add.Tensor"]["native"] >= 2 and counts["relu.default"]["native"] >= 2
    torch.testing.assert_close(out, torch.relu(a + b))


#: a transposed operand the gate cannot launch, beside calls it can (a broadcast bias
#: among them); a Python number for a Tensor argument (``x * 0.125`` in a model), which the
#: judge hands the twin as aten's entry does
JUDGED_TRACE = """Operator: aten.relu.default
cnt: 2, ((T([4096, 256], f16),), {})
Operator: aten.add.Tensor
cnt: 2, ((T([512, 1024], f32), T([512, 1024], f32)), {})
cnt: 1, ((T([512, 1024], f32), T([1024], f32)), {})
cnt: 1, ((T([512, 1024], f32, stride=(1, 512)), T([512, 1024], f32)), {})
Operator: aten.mul.Tensor
cnt: 1, ((T([8, 128, 1024], f16), 0.125), {})
"""


@pytest.mark.parametrize("python_calls", [False, True])
def test_the_judge_calls_a_declared_kernel_through_the_gate(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, python_calls: bool
) -> None:
    """A judged run calls the kernels the gate can launch as a model does (its details
    say so, with the gate's counts: every call native), a call the gate cannot launch as
    one kernel through the replay of its Python path's launches, and ``python_calls``
    every call as the Python function."""
    from opbench.run.session import RunRequest, run
    from opbench.run.store import ResultStore

    monkeypatch.setenv("OPBENCH_NATIVE", "1")  # workers inherit it
    traces = tmp_path / "judged.txt"
    traces.write_text(JUDGED_TRACE)
    out = tmp_path / "run"
    run(
        RunRequest(
            suite=f"traces:{traces}",
            backend="triton",
            device="cuda",
            perf=True,
            out=out,
            python_calls=python_calls,
        )  # fmt: skip
    )
    results = list(ResultStore(out / "results.sqlite").results())
    assert len(results) == 5 and all(r.status == "passed" for r in results), [
        (r.op, r.status, r.message) for r in results
    ]
    for r in results:
        route = r.details.get("call_route")
        transposed = "stride=" in r.args
        if python_calls:
            assert route is None, (r.args, route)
            continue
        assert route["route"] == "native", route
        assert route["counts"]["python"] == 0 and route["counts"]["native"] > 10, route
        # the transposed call is no elementwise launch of the gate's: its Python path's
        # launches were recorded before the trials and replayed in them
        assert (route["counts"]["replayed"] > 10) == transposed, (r.args, route)
