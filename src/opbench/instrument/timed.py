"""What a worker keeps of a candidate's timed calls for the harness: the last output.

The harness judges it against the reference for the timing inputs
(:mod:`opbench.judge.timed_output`, :mod:`opbench.programs.judge`): a candidate that
computes for the correctness trials and stops once it is timed fails. Nothing here
decides anything; the wrapper records and the worker sends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opbench.instrument import tensors

__all__ = ["keeping_last", "last_output"]


def keeping_last(fn: Callable[..., Any], last: list[Any]) -> Callable[..., Any]:
    """``fn`` keeping its latest result in ``last`` (one reference: the previous result
    is released); the same object serves every timed call, so the candidate cannot tell
    which call is kept."""

    def call(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        last[:] = [result]
        return result

    call._schema = getattr(fn, "_schema", None)  # type: ignore[attr-defined]
    return call


def last_output(last: list[Any], device: str) -> dict[str, Any]:
    """The kept output as plain data for the harness (nothing when no call was made)."""
    if not last:
        return {}
    tensors.sync(device)
    return {
        "timed_output": tensors.cpu_outputs(last[0]),
        "timed_output_meta": tensors.output_meta(last[0]),
    }
