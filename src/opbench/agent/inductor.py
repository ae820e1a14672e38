"""Inductor's code for an operator, as a labelled baseline beside a model's attempts.

Training data is worth more with a reference implementation of the same kind beside each
answer: ``torch.compile`` (Inductor, default mode) on the operator alone, run on the first
case the suite has for it, and the source Inductor generated for that call captured with
``torch._inductor.utils.run_and_get_code``. On CUDA that is Triton; on the CPU Inductor
emits C++ (labelled ``inductor-cpp``), which is why the issue asks for it on CUDA.

This runs PyTorch's own code on inputs opbench builds, never a candidate, so it runs in
the exporting process.
"""

from __future__ import annotations

from typing import Any

__all__ = ["inductor_baseline"]


def _first_case(op: str, suite: str, device: str) -> Any:
    from opbench.run.session import RunRequest, load_suite_cases, select_cases

    req = RunRequest(suite=suite, ops=[op], device=device)
    cases = select_cases(req, load_suite_cases(req)).cases
    if not cases:
        raise ValueError(f"the {suite} suite has no test for {op}")
    return cases[0]


def inductor_baseline(op: str, *, device: str = "cpu", suite: str = "opinfo") -> dict[str, Any]:
    """One export row: the code Inductor generates for ``op`` on the suite's first case
    (``error`` instead of ``code`` when it cannot compile it)."""
    import torch
    from torch._inductor.utils import run_and_get_code

    from opbench.spec.ops import get_overload
    from opbench.suites.materialize import materialize

    case = _first_case(op, suite, device)
    args, kwargs = materialize(case, device)
    overload = get_overload(case.op)
    row: dict[str, Any] = {
        "op": case.op,
        "baseline": "inductor",
        "dsl": "inductor-triton" if str(device).startswith("cuda") else "inductor-cpp",
        "case": case.args,
        "device": str(device),
        "torch": torch.__version__,
    }
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a, **k: overload(*a, **k), fullgraph=True)
    try:
        _, codes = run_and_get_code(compiled, *args, **kwargs)
    except Exception as e:  # noqa: BLE001 - an op Inductor cannot compile is recorded
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        return row
    finally:
        torch._dynamo.reset()
    row["code"] = "\n\n".join(codes)
    return row
