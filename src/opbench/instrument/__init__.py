"""The instrument: the code that runs in the worker, beside candidate kernels.

Everything here may be changed by candidate code once it is imported, so nothing here
decides a verdict. It calls the kernel, records what happened as plain data (outputs,
inputs as they are after the call, what the observers saw, what changed in the
process), times it, and sends that to the harness. The deciding code lives in
:mod:`opbench.judge`, which runs in the harness and never imports candidate code.

Modules: :mod:`~opbench.instrument.records` (the plain-data report),
:mod:`~opbench.instrument.candidate` (running one case's trials),
:mod:`~opbench.instrument.observer` (which PyTorch calls a kernel makes),
:mod:`~opbench.instrument.integrity` (whether the process was tampered with). The
timing loops (:mod:`opbench.instrument.timing`) also run here, with timers captured before
any candidate import.
"""
