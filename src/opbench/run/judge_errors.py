"""A test the harness cannot plan or judge is that test's ``judge_error``, never the run's.

The harness plans every test with its own code (materializes the inputs, computes
eager's outputs and a float64 reference, digests its inputs) and judges the worker's
report with its own code. An exception there is a limit or bug of opbench, not of the
kernel: one OpInfo case whose inputs the digest could not read once ended a whole H100
run. Here such an exception becomes the result of that one test, status and category
``judge_error``, with the exception as its message and a short traceback in
``details``, and the run goes on.

A ``judge_error`` is never counted against the backend: :mod:`opbench.report.metrics`
leaves it out of every verdict the way it leaves out skipped tests, an operator left
with no other test is listed under ``not_tested``, ``summary.json`` counts them under
``judge_errors``, and ``opbench run`` exits 3 (the run is incomplete).
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from opbench.run.store import TestResult, case_fields
from opbench.suites.case import Case

__all__ = ["JUDGE_ERROR", "judge_error_fields", "judge_error_result"]

log = logging.getLogger(__name__)

#: The status and failure category of a test the harness could not plan or judge.
JUDGE_ERROR = "judge_error"
#: Innermost frames kept: where the harness failed, without the executor's own frames.
TRACEBACK_FRAMES = 8
#: Characters of the message and of the traceback kept in the results store.
MAX_MESSAGE = 1000
MAX_TRACEBACK = 4000


def judge_error_fields(error: BaseException, stage: str, test_id: str) -> dict[str, Any]:
    """The fields of a :class:`TestResult` for a test whose ``stage`` (``plan`` or
    ``judge``) raised ``error`` in the harness; the test's own fields go beside them."""
    tb = "".join(
        traceback.format_exception(type(error), error, error.__traceback__, limit=-TRACEBACK_FRAMES)
    )
    log.warning("judge_error in %s of %s: %s: %s", stage, test_id, type(error).__name__, error)
    message = f"the harness could not {stage} this test: {type(error).__name__}: {error}"
    return dict(
        status=JUDGE_ERROR,
        category=JUDGE_ERROR,
        message=message[:MAX_MESSAGE],
        details={"stage": stage, "traceback": tb[-MAX_TRACEBACK:]},
    )


def judge_error_result(
    case: Case, error: BaseException, stage: str, *, backend: str, device: str, worker: str = ""
) -> TestResult:
    """The result of ``case`` when its ``stage`` (``plan`` or ``judge``) raised ``error``."""
    return TestResult(
        **judge_error_fields(error, stage, case.test_id),
        **case_fields(case, backend=backend, device=device, worker=worker),
    )
