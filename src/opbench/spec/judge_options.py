"""How strict the judge is: a plain description the harness builds from the run's flags
and hands to the worker (which reads ``trials`` and ``check_determinism`` to run the
trials the harness will judge). Lives apart from :mod:`opbench.judge` so a worker never
imports judging code."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["JudgeOptions"]


@dataclass
class JudgeOptions:
    """How strict the judge is. ``rtol_scale``/``atol_scale`` multiply the dtype floors
    (see :mod:`opbench.judge.correctness`); ``allow_pytorch`` turns ``calls_pytorch`` into
    a warning; ``trials`` is the number of input sets (>= 1); ``allow_threads``
    (``--allow threads``) lets a unit leave threads and processes running
    (:mod:`opbench.judge.neighbour_verdict`; they still must not run beside the reference);
    ``native_calls`` (off: ``--python-calls``) calls a kernel that declares a native launch
    through opbench's C++ gate on CUDA, as a model calls it
    (:mod:`opbench.instrument.native_calls`)."""

    rtol_scale: float = 1.0
    atol_scale: float = 1.0
    allow_pytorch: bool = False
    allow_threads: bool = False
    trials: int = 2
    check_determinism: bool = True
    check_weak: bool = True
    native_calls: bool = True
