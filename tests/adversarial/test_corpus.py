"""The adversarial corpus: kernels that each try one trick, run together through the real
``opbench run`` path (:func:`opbench.run.session.run`), next to honest kernels.

Each trick must be caught with the right category, the run must complete, and the honest
kernels in the same run must still pass. The kernels live in ``kernels/`` (BackendBench
layout, one folder per overload, a docstring naming the trick); they are copied to a
temporary folder so a trick that escapes cannot touch the repository.
"""

from __future__ import annotations

from collections import Counter

import adversarial_corpus as corpus
import pytest
from adversarial_corpus import (
    EXPECTED,
    HONEST,
    SANDBOX_ONLY,
    SCAN_BLOCKS,
    TIMED_ONLY,
    all_scan_rules,
    run_corpus,
)

from opbench.run import sandbox

TEST_TIMEOUT_S = 10.0
MEMORY_LIMIT_MB = 1000


def _run(tmp, **extra):
    res = run_corpus(
        tmp,
        device="cpu",
        perf=False,
        workers=2,
        test_timeout_s=TEST_TIMEOUT_S,
        sandbox="auto",
        memory_limit_mb=MEMORY_LIMIT_MB,
        **extra,
    )
    if res["error"]:
        pytest.fail(f"the corpus run did not complete: {res['error']}")
    return res


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory):
    """The runtime layer: every static-scan rule allowed, so each trick is imported."""
    return _run(tmp_path_factory.mktemp("adversarial"), allow_rules=all_scan_rules())


@pytest.fixture(scope="module")
def scanned_run(tmp_path_factory: pytest.TempPathFactory):
    """The default: the static scan stops what it recognises before any import."""
    return _run(tmp_path_factory.mktemp("adversarial-scanned"))


def test_run_completes_with_every_test_recorded(corpus_run):
    summary = corpus_run["summary"]
    n_cases = corpus.n_cases(gpu=False)
    assert summary["tests"]["total"] == n_cases
    assert sum(len(v) for v in corpus_run["by_op"].values()) == n_cases
    print(f"corpus run: {corpus_run['elapsed']:.1f} s, sandbox {summary['sandbox']}")


@pytest.mark.parametrize("op", HONEST)
def test_honest_kernels_still_pass(corpus_run, op):
    results = corpus_run["by_op"][op]
    assert results and all(r.status == "passed" for r in results), [
        (r.status, r.category, r.message) for r in results
    ]
    assert corpus_run["summary"]["ops"][f"aten.{op}"]["correct"] is True


@pytest.mark.parametrize("op", sorted(EXPECTED))
def test_trick_is_caught(corpus_run, op):
    (r,) = corpus_run["by_op"][op]
    assert r.status == "failed", (r.status, r.category, r.message)
    assert r.category in EXPECTED[op], (r.category, r.message)
    assert corpus_run["summary"]["ops"][f"aten.{op}"]["correct"] is False


def test_segfault_is_a_crash_and_the_budget_stops_the_op(corpus_run):
    results = corpus_run["by_op"]["neg.default"]
    kinds = Counter((r.status, r.category) for r in results)
    crashes = kinds[("failed", "crash")]
    not_run = kinds[("not_run", "crash")]
    # Two slots may each start one of the op's tests before the third crash lands.
    assert 3 <= crashes <= 4 and crashes + not_run == 5, kinds
    assert any("SIGSEGV" in r.message for r in results if r.status == "failed")
    assert all("--max-crashes-per-op" in r.message for r in results if r.status == "not_run")


def test_exit_calls_say_how_the_worker_died(corpus_run):
    for op in ("sin.default", "cos.default"):
        (r,) = corpus_run["by_op"][op]
        assert "exit code 0" in r.message, r.message


def test_oom_names_the_limit(corpus_run):
    (r,) = corpus_run["by_op"]["sigmoid.default"]
    assert f"{MEMORY_LIMIT_MB} MB limit" in r.message


def test_sandbox_level_is_recorded(corpus_run):
    expected = "bwrap" if sandbox.bwrap_works() else "none"
    assert corpus_run["summary"]["sandbox"] == expected


@pytest.mark.skipif(not sandbox.bwrap_works(), reason="bubblewrap (bwrap) is not usable here")
@pytest.mark.parametrize("op", sorted(SANDBOX_ONLY))
def test_sandbox_stops_escapes(corpus_run, op):
    (r,) = corpus_run["by_op"][op]
    assert (r.status, r.category) == ("failed", "error"), (SANDBOX_ONLY[op], r.message)


@pytest.mark.skipif(not sandbox.bwrap_works(), reason="bubblewrap (bwrap) is not usable here")
def test_escapes_left_no_trace(corpus_run):
    assert not (corpus_run["out"] / "pwned.txt").exists()
    assert not (corpus_run["kernels"] / "pwned.txt").exists()
    assert corpus_run["listener"].connections == 0


@pytest.mark.parametrize("op", sorted(TIMED_ONLY))
def test_untimed_delegation_is_not_seen_without_timing(corpus_run, op):
    """The reason the timed calls are observed too (the next test)."""
    assert all(r.status == "passed" for r in corpus_run["by_op"][op])


@pytest.mark.slow
def test_delegating_only_while_timed_is_caught(tmp_path):
    """log2 computes honestly for the correctness calls, then delegates: timed on CPU, the
    observed first timed calls show it."""
    kernels = tmp_path / "k"
    corpus.shutil.copytree(corpus.KERNELS / "log2__default", kernels / "log2__default")
    by_op = corpus.run_timed(
        tmp_path, kernels, "Operator: aten.log2.default\ncnt: 1, ((T([64, 64], f32),), {})\n"
    )
    (r,) = by_op["log2.default"]
    assert (r.status, r.category) == ("failed", "calls_pytorch"), r.message
    assert "while being timed" in r.message


@pytest.mark.slow
def test_scan_blocks_recognised_tricks_before_import(scanned_run):
    for op in SCAN_BLOCKS:
        results = scanned_run["by_op"][op]
        assert results and all(r.category == "tampering" for r in results), (op, results)
        assert all(r.message.startswith("static scan") for r in results)
        assert all(r.worker == "" for r in results)  # decided without a worker
    files = scanned_run["summary"]["static_scan"]["files"]
    assert "relu__default/relu__default_implementation.py" in files
    assert files["relu__default/relu__default_implementation.py"] == []
    assert scanned_run["summary"]["static_scan"]["allowed_rules"] == []


@pytest.mark.slow
def test_every_trick_fails_with_the_scan_on(scanned_run):
    for op, cats in {**EXPECTED, **TIMED_ONLY}.items():
        if op in TIMED_ONLY:
            continue
        for r in scanned_run["by_op"][op]:
            assert r.status == "failed", (op, r.status, r.message)
            assert r.category in cats | {"tampering"}, (op, r.category, r.message)
    for op in ("relu.default", "mul.Tensor"):
        assert all(r.status == "passed" for r in scanned_run["by_op"][op])


def test_tampering_neighbour_does_not_change_a_verdict(corpus_run):
    """log1p's module patches comparisons and the judge's helpers at import; reciprocal,
    in the same directory, zeroes its input and is still caught."""
    (r,) = corpus_run["by_op"]["reciprocal.default"]
    assert (r.status, r.category) == ("failed", "mutates_input"), r.message
    (t,) = corpus_run["by_op"]["log1p.default"]
    assert t.category == "tampering", t.message


LAZY_ONCE_TIMED = '''"""Trick: compute honestly for the first calls (the correctness trials and their
repeat), then return an empty tensor: no PyTorch compute, no work at all, a huge
"speedup". Expected with timing on: cheat (the last timed call's output is judged)."""

import numpy as np
import torch

_calls = [0]


def relu__default_kernel_impl(x):
    _calls[0] += 1
    if _calls[0] > 12:
        return torch.empty_like(x)
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.maximum(a, 0).astype(a.dtype)).to(x.device)
'''


@pytest.mark.slow
def test_stopping_work_once_timed_is_caught(tmp_path):
    """The timed calls' last output is judged against the reference for the timing
    inputs: a kernel right for the trials and lazy once timed fails as cheat, while the
    honest kernel beside it keeps its speedup."""
    kernels = tmp_path / "k"
    (kernels / "relu__default").mkdir(parents=True)
    (kernels / "relu__default" / "relu__default_implementation.py").write_text(LAZY_ONCE_TIMED)
    corpus.shutil.copytree(corpus.KERNELS / "mul__Tensor", kernels / "mul__Tensor")
    by_op = corpus.run_timed(
        tmp_path,
        kernels,
        "Operator: aten.relu.default\ncnt: 1, ((T([64, 64], f32),), {})\n"
        "Operator: aten.mul.Tensor\ncnt: 1, ((T([64, 64], f32), T([64, 64], f32)), {})\n",
    )
    (lazy,), (honest,) = by_op["relu.default"], by_op["mul.Tensor"]
    assert (lazy.status, lazy.category) == ("failed", "cheat"), lazy.message
    assert "timed call" in lazy.message
    assert honest.status == "passed" and honest.speedup is not None, honest.message
