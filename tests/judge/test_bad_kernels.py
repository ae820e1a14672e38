"""Deliberately bad kernels, one per failure category, and correct kernels written
without PyTorch compute (numpy) that must pass with no false positives.

The harness's planning, the worker side and the harness's judgement are called
in-process here (:func:`judge_in_process`); in a real run they live in different
processes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from opbench.judge.evaluate import JudgeOptions, judge_in_process
from opbench.suites.case import Case

OPTS = JudgeOptions()


def judge(op: str, args: str, kernel, options: JudgeOptions = OPTS, seed: int = 0):
    case = Case(op=op, args=args, seed=seed, suite="test")
    return judge_in_process(case, kernel, "cpu", options)


ADD = "((T([32, 64], f32), T([32, 64], f32)), {})"
ADD_BCAST_F16 = "((T([8, 16, 32], f16), T([32], f16)), {'alpha': 2})"
ADD_STRIDED = "((T([32, 64], f32, stride=(1, 32)), T([32, 64], f32)), {})"
ADD_OUT = "((T([32, 64], f32), T([32, 64], f32)), {'out': T([32, 64], f32)})"


# --------------------------------------------------------------------------- correct kernels


def np_add(a, b, alpha=1):
    r = a.numpy() + b.numpy() * np.asarray(alpha, dtype=a.numpy().dtype)
    return torch.from_numpy(np.ascontiguousarray(r))


def np_add_(a, b, alpha=1):
    a.numpy()[...] = a.numpy() + b.numpy() * np.asarray(alpha, dtype=a.numpy().dtype)
    return a


def np_add_out(a, b, alpha=1, *, out):
    out.numpy()[...] = a.numpy() + b.numpy() * np.asarray(alpha, dtype=a.numpy().dtype)
    return out


def np_relu(x):
    return torch.from_numpy(np.maximum(x.numpy(), 0).astype(x.numpy().dtype))


def np_mm(a, b):
    return torch.from_numpy(np.ascontiguousarray(a.numpy() @ b.numpy()))


def np_sum_dim(x, dim, keepdim=False, dtype=None):
    return torch.from_numpy(np.asarray(x.numpy().sum(axis=tuple(dim), keepdims=keepdim)))


@pytest.mark.parametrize(
    "op,args,kernel",
    [
        ("add.Tensor", ADD, np_add),
        ("add.Tensor", ADD_BCAST_F16, np_add),
        ("add.Tensor", ADD_STRIDED, np_add),
        ("add_.Tensor", ADD, np_add_),
        ("add_.Tensor", ADD_STRIDED, np_add_),
        ("add.out", ADD_OUT, np_add_out),
        ("relu.default", "((T([16, 128], f32),), {})", np_relu),
        ("mm.default", "((T([64, 256], f32), T([256, 32], f32)), {})", np_mm),
        ("sum.dim_IntList", "((T([16, 4096], f32), [1]), {})", np_sum_dim),
    ],
)
def test_correct_numpy_kernels_pass(op, args, kernel):
    v = judge(op, args, kernel)
    assert v.status == "passed", v
    assert not v.weak
    assert "calls_pytorch" not in v.details


# --------------------------------------------------------------------------- one per category


def test_wrong_value_is_wrong_result():
    def perturbed(a, b, alpha=1):
        r = a.numpy() + b.numpy() * alpha
        r[3, 5] += 1e-2
        return torch.from_numpy(r)

    v = judge("add.Tensor", ADD, perturbed)
    assert (v.status, v.category) == ("failed", "wrong_result")
    assert "[3, 5]" in v.message and "allowed" in v.message


def test_wrong_dtype_is_wrong_meta():
    def f64(a, b, alpha=1):
        return torch.from_numpy(a.numpy().astype(np.float64) + b.numpy() * alpha)

    v = judge("add.Tensor", ADD, f64)
    assert (v.status, v.category) == ("failed", "wrong_meta")
    assert "float64" in v.message


def test_wrong_shape_is_wrong_meta():
    def flat(a, b, alpha=1):
        return torch.from_numpy((a.numpy() + b.numpy() * alpha).reshape(-1))

    v = judge("add.Tensor", ADD, flat)
    assert (v.status, v.category) == ("failed", "wrong_meta")


def test_inplace_returning_self_untouched_fails():
    v = judge("add_.Tensor", ADD, lambda a, b, alpha=1: a)
    assert (v.status, v.category) == ("failed", "wrong_result")


def test_inplace_returning_new_tensor_is_bad_alias():
    v = judge("add_.Tensor", ADD, np_add)  # right values, but not written into self
    assert (v.status, v.category) == ("failed", "bad_alias")
    assert "self" in v.message


def test_out_returning_new_tensor_is_bad_alias():
    def new(a, b, alpha=1, *, out):
        return np_add(a, b, alpha)

    v = judge("add.out", ADD_OUT, new)
    assert (v.status, v.category) == ("failed", "bad_alias")


def test_writing_into_an_input_is_mutates_input():
    def clobber(a, b, alpha=1):
        r = np_add(a, b, alpha)
        b.numpy()[...] = 0  # scratch space in an input the op must not touch
        return r

    v = judge("add.Tensor", ADD, clobber)
    assert (v.status, v.category) == ("failed", "mutates_input")
    assert "args[1]" in v.message


def test_functional_returning_its_input_is_flagged():
    def relu_inplace_on_input(x):
        x.numpy()[...] = np.maximum(x.numpy(), 0)
        return x

    v = judge("relu.default", "((T([16, 128], f32),), {})", relu_inplace_on_input)
    assert v.status == "failed"
    assert v.category in ("bad_alias", "mutates_input")


def test_calling_torch_add_is_calls_pytorch():
    def delegate(a, b, alpha=1):
        return torch.add(a, b, alpha=alpha)

    v = judge("add.Tensor", ADD, delegate)
    assert (v.status, v.category) == ("failed", "calls_pytorch")
    assert "add.Tensor" in v.message


def test_allow_pytorch_turns_it_into_a_warning():
    def delegate(a, b, alpha=1):
        return torch.add(a, b, alpha=alpha)

    v = judge("add.Tensor", ADD, delegate, JudgeOptions(allow_pytorch=True))
    assert v.status == "passed"
    assert (
        v.details["calls_pytorch"] == {"add.Tensor": 2}
        or "add.Tensor" in v.details["calls_pytorch"]
    )
    assert any("add.Tensor" in w for w in v.details["warnings"])


def test_caching_by_shape_is_caught():
    cache: dict = {}

    def cached(a, b, alpha=1):
        key = (tuple(a.shape), tuple(b.shape))
        if key not in cache:
            cache[key] = np_add(a, b, alpha)
        return cache[key]

    v = judge("add.Tensor", ADD, cached)
    assert (v.status, v.category) == ("failed", "cheat")
    assert "cached" in v.message


class Lazy(torch.Tensor):
    pass


def test_tensor_subclass_output_is_cheat():
    v = judge("add.Tensor", ADD, lambda a, b, alpha=1: np_add(a, b, alpha).as_subclass(Lazy))
    assert (v.status, v.category) == ("failed", "cheat")
    assert "Lazy" in v.message


def test_zeros_on_a_zero_size_output_is_weak():
    def zeros(x):
        return torch.from_numpy(np.zeros(x.shape, dtype=np.float32))

    v = judge("relu.default", "((T([0, 8], f32),), {})", zeros)
    assert v.status == "passed"
    assert v.weak
    assert "weak" in v.message


def test_zeros_fail_where_the_test_is_not_weak():
    v = judge(
        "relu.default",
        "((T([16, 8], f32),), {})",
        lambda x: torch.from_numpy(np.zeros(x.shape, dtype=np.float32)),
    )
    assert (v.status, v.category) == ("failed", "wrong_result")


def test_nan_where_eager_has_none_is_nan_mismatch():
    def nan_once(a, b, alpha=1):
        r = a.numpy() + b.numpy() * alpha
        r[0, 0] = np.nan
        return torch.from_numpy(r)

    v = judge("add.Tensor", ADD, nan_once)
    assert (v.status, v.category) == ("failed", "nan_mismatch")


def test_run_to_run_noise_is_nondeterministic():
    rng = np.random.default_rng(0)

    def noisy_sum(x, dim, keepdim=False, dtype=None):
        xs = x.numpy()
        order = rng.permutation(xs.shape[1])  # a different summation order each call
        r = np.zeros(xs.shape[0], dtype=np.float32)
        for j in order:
            r += xs[:, j]
        return torch.from_numpy(r)

    v = judge("sum.dim_IntList", "((T([8, 512], f32), [1]), {})", noisy_sum)
    assert (v.status, v.category) == ("failed", "nondeterministic")


def test_raising_is_error_and_not_implemented_is_separate():
    def boom(a, b, alpha=1):
        raise ValueError("kaput")

    v = judge("add.Tensor", ADD, boom)
    assert (v.status, v.category) == ("failed", "error")
    assert "ValueError: kaput" in v.message

    def decline(a, b, alpha=1):
        raise NotImplementedError("only 1-D")

    v = judge("add.Tensor", ADD, decline)
    assert (v.status, v.category) == ("not_implemented", "not_implemented")


def test_low_precision_matmul_fails():
    def mm_f16_accumulate(a, b):
        return torch.from_numpy(
            (a.numpy().astype(np.float16) @ b.numpy().astype(np.float16)).astype(np.float32)
        )

    v = judge("mm.default", "((T([64, 512], f32), T([512, 32], f32)), {})", mm_f16_accumulate)
    assert (v.status, v.category) == ("failed", "wrong_result")


TRITON_SCRIPT = r"""
import json, os
assert os.environ["TRITON_INTERPRET"] == "1"
import torch, triton, triton.language as tl

from opbench.judge.evaluate import JudgeOptions, judge_in_process
from opbench.suites.case import Case


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x + alpha * y).to(out_ptr.dtype.element_ty), mask=mask)


def add(a, b, alpha=1):
    a, b = a.contiguous(), b.expand_as(a).contiguous()
    out = torch.empty_like(a)
    n = a.numel()
    _add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, alpha, BLOCK=1024)
    return out


def add_(a, b, alpha=1):
    a.copy_(add(a, b, alpha)) if not a.is_contiguous() else _add_kernel[
        (triton.cdiv(a.numel(), 1024),)
    ](a, b.expand_as(a).contiguous(), a, a.numel(), alpha, BLOCK=1024)
    return a


results = {}
opts = JudgeOptions()
for op, args, kernel in [
    ("add.Tensor", "((T([64, 96], f32), T([96], f32)), {'alpha': 2})", add),
    ("add.Tensor", "((T([33, 65], f16), T([33, 65], f16)), {})", add),
    ("add_.Tensor", "((T([64, 96], f32), T([64, 96], f32)), {})", add_),
]:
    case = Case(op=op, args=args)
    v = judge_in_process(case, kernel, "cpu", opts)
    results[f"{op} {args}"] = [v.status, v.category, v.message]
print("RESULTS" + json.dumps(results))
"""


@pytest.mark.slow
def test_correct_triton_kernels_pass_under_the_interpreter(tmp_path):
    """A Triton kernel (interpreter, separate process) passes with no false positives:
    the interpreter's own tensor plumbing (empty_like, copy_, set_...) is allowed."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton")
    script = tmp_path / "triton_add.py"
    script.write_text(TRITON_SCRIPT)
    src = Path(__file__).resolve().parents[2] / "src"
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULTS"))
    results = json.loads(line[len("RESULTS") :])
    for key, (status, category, message) in results.items():
        assert status == "passed", (key, category, message)


def test_a_kernel_alternating_its_answers_is_caught_where_the_repeat_lands(monkeypatch) -> None:
    """The repeat of the first trial runs at a position the harness draws in secret: a
    kernel that flips every other call repeated its first answer exactly when the repeat
    always came after the last trial (two trials: calls 1 and 3 agree)."""
    import opbench.judge.expectations as expectations

    calls = [0]

    def alternating_relu(x):
        calls[0] += 1
        r = np.maximum(x.numpy(), 0)
        if calls[0] % 2 == 0:
            r[0] = np.nextafter(r[0], np.float32(np.inf))
        return torch.from_numpy(r)

    args = "((T([64], f32),), {})"
    monkeypatch.setattr(expectations.secrets, "randbelow", lambda n: 0)  # right after trial 1
    v = judge("relu.default", args, alternating_relu)
    assert v.category == "nondeterministic", v
    monkeypatch.setattr(expectations.secrets, "randbelow", lambda n: n - 1)  # the old place
    calls[0] = 0
    assert judge("relu.default", args, alternating_relu).status == "passed"
