"""Program-level problems: whole ``nn.Module`` programs judged against PyTorch.

KernelBench's format (a problem file with ``class Model``, ``get_inputs()`` and
``get_init_inputs()``; a candidate file with ``class ModelNew``), judged with opbench's
rules instead of KernelBench's: the candidate gets the reference's weights by name
(``load_state_dict(strict=True)``), each side its own fresh inputs, opbench's correctness
rule on several seeds, and eager (optionally ``torch.compile``) timed live against it with
opbench's timing protocol. Candidates run only in sandboxed workers.

Modules: :mod:`~opbench.programs.loader` (finding problems, runnable here?),
:mod:`~opbench.programs.inputs` (inputs from a seed), :mod:`~opbench.programs.reference`
(the harness's references), :mod:`~opbench.programs.instrument` (the worker side),
:mod:`~opbench.programs.judge` (the verdict), :mod:`~opbench.programs.summary` (scores),
:mod:`~opbench.programs.runner` (the run). ``docs/programs-runner.md`` is the user guide.
"""
