"""The judging template's warm-up: importing this module IS the template's start.

:func:`opbench.run.judge_template.start` names it as the ``forkserver``'s only preload,
so it runs once, in the template process, before the first judging process is forked:
it hides the GPUs (on a GPU run), imports torch, the judge and the suite's warm entries,
and freezes what it imported so the forks do not copy it page by page. Nothing else
imports it (outside the template its import does nothing, not even hide a GPU: it acts
only where :data:`~opbench.run.judge_template.TEMPLATE_ENV` says it is the template).

A failed import here is logged and left to the forks (each imports what it lacks as a
spawned judging process would); the template must still fork.
"""

from __future__ import annotations

import os
import time

#: What the template's warm-up took: seconds a step (``torch``, each module and warm
#: entry) and ``done_at`` (Unix time), which its forks report with their first answer
#: (``timing_s.slots_start``'s ``judge`` in a run's summary).
TIMES: dict[str, float] = {}


def _warm_up() -> None:
    import atexit
    import gc
    import traceback

    from opbench.run.forkserver import template_env
    from opbench.run.judge_template import template_settings
    from opbench.run.warm_up import warm_up

    settings = template_settings()
    if not settings:
        return
    os.environ.update(template_env(dict(os.environ), settings.get("device", "cpu")))
    t0 = time.perf_counter()
    import torch

    TIMES["torch"] = round(time.perf_counter() - t0, 3)

    # one thread: an OpenMP parallel region run here (by a warm entry's tensors) would
    # leave its threads' team behind in every fork, whose first parallel region then
    # waits for threads that do not exist (a fork summing 2^24 float64 values hung on the
    # 2-core CPU, 2026-11-28); each fork sets its own threads (slot_judge._start_judge)
    torch.set_num_threads(1)
    names = ["opbench.judge.evaluate", "opbench.run.outcome_verdict",
             *settings.get("warm", ())]  # fmt: skip
    for name in names:
        t0 = time.perf_counter()
        try:
            warm_up([name])
        except Exception:  # noqa: BLE001 - the forks load it again and say why
            traceback.print_exc()
        TIMES[name] = round(time.perf_counter() - t0, 3)
    # imported objects are shared with the forks copy-on-write; a collection in a fork
    # would touch (and so copy) every page of them (the workers' template does the same)
    gc.collect()
    gc.freeze()
    # at the template's exit (its forks end with os._exit and never run this), back to
    # collectable: frozen Triton objects outlived their library, which then listed each
    # as leaked on stderr
    atexit.register(gc.unfreeze)
    TIMES["done_at"] = time.time()


_warm_up()
