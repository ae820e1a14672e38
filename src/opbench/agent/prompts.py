"""What a model is told, and how its answer is read.

:func:`task_messages` builds the first request for one overload: the system rules (what
the judge checks, the guard and the static scan included), then the task: the kernel
file's contract as ``opbench init`` renders it (schema, argument meanings, the variants
the kernel serves, the dtypes and argument shapes real models use), the edge cases the
judge tests, notes for the target DSL and an example kernel for a different operator.
:func:`feedback_message` turns a verdict into the next request; :func:`extract_code`
takes the last complete ``python`` block of an answer.

Templates are files in ``opbench/agent/templates/`` (``system.md``, ``task.md``,
``feedback.md``, ``dsl_<dsl>.md``, ``example_<dsl>.py``); a user folder given as
``templates`` overrides any of them by name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = [
    "DSLS",
    "available_dsls",
    "NoCodeBlock",
    "extract_code",
    "feedback_message",
    "load_template",
    "task_messages",
]

_BUILTIN = Path(__file__).with_name("templates")
#: Target DSLs with templates here, and how they are named in the prompt. Another DSL
#: (Helion, CuTe, ...) is added by a user template folder holding ``dsl_<name>.md`` and
#: ``example_<name>.py``: :func:`available_dsls` finds it there.
DSLS = {
    "triton": "Triton (Python, @triton.jit)",
    "cuda": "CUDA C++ (built with torch.utils.cpp_extension.load_inline)",
    "cpp": "C++ for the CPU (built with torch.utils.cpp_extension.load_inline)",
}
#: What the opinfo and traces suites put in front of every kernel.
EDGE_CASES = (
    "every dtype the operator takes (float16, bfloat16, float32, and integers where "
    "defined), broadcasting, non-contiguous and stride-0 inputs, zero-size and 0-dim "
    "tensors, NaN, +-Inf and large magnitudes, the in-place and out= variants, and the "
    "argument shapes listed above."
)

_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)\n```", re.DOTALL)


class NoCodeBlock(ValueError):
    """An answer without a complete ``python`` code block (the loop's ``no_code``)."""


def load_template(name: str, templates: str | Path | None = None) -> str:
    """The template ``name`` from the user's folder if it has it, else the built-in."""
    if templates is not None:
        own = Path(templates) / name
        if own.is_file():
            return own.read_text()
    path = _BUILTIN / name
    if not path.is_file():
        raise FileNotFoundError(f"no prompt template {name!r} (looked in {templates}, {_BUILTIN})")
    return path.read_text()


def available_dsls(templates: str | Path | None = None) -> dict[str, str]:
    """The built-in DSLs and those a user folder adds (``dsl_<name>.md`` beside
    ``example_<name>.py``), each with its name for the prompt (for a user's DSL, the
    notes' first line when it is a ``# heading``, else the name)."""
    found = dict(DSLS)
    if templates is not None and Path(templates).is_dir():
        for notes in sorted(Path(templates).glob("dsl_*.md")):
            name = notes.stem[len("dsl_") :]
            if name in found or not (notes.parent / f"example_{name}.py").is_file():
                continue
            first = notes.read_text().splitlines()[:1]
            heading = first[0][2:].strip() if first and first[0].startswith("# ") else ""
            found[name] = heading or name
    return found


def task_messages(
    target: str,
    *,
    dsl: str = "triton",
    device: str = "cuda",
    traces: str | Path | None = None,
    templates: str | Path | None = None,
) -> list[dict[str, str]]:
    """The first request for overload (or bare op) ``target``: a system and a user
    message. ``traces`` adds the dtypes and argument shapes models use (as ``opbench
    init`` renders them)."""
    from opbench.backends.scaffold import render_template, trace_stats
    from opbench.spec.ops import folder_name

    dsls = available_dsls(templates)
    if dsl not in dsls:
        raise ValueError(
            f"unknown DSL {dsl!r}; templates exist for {', '.join(dsls)} (add one with "
            f"dsl_{dsl}.md and example_{dsl}.py in a --templates folder)"
        )
    stats = None
    if traces is not None:
        stats = trace_stats(traces).get(target)
    folder = folder_name(target)
    fields: dict[str, Any] = {
        "target": target,
        "folder": folder,
        "dsl_name": dsls[dsl],
        "device": device,
        "template": render_template(target, stats).strip(),
        "edge_cases": EDGE_CASES,
        "dsl_notes": load_template(f"dsl_{dsl}.md", templates).strip().format(folder=folder),
        "example": load_template(f"example_{dsl}.py", templates).strip(),
    }
    return [
        {"role": "system", "content": load_template("system.md", templates).strip()},
        {"role": "user", "content": load_template("task.md", templates).format(**fields).strip()},
    ]


def feedback_message(
    target: str, verdict: str, details: str, templates: str | Path | None = None
) -> dict[str, str]:
    """The next request after a verdict (``details``: the failing tests with their
    inputs, expected and actual summaries and messages, or the speedups)."""
    text = load_template("feedback.md", templates).format(
        target=target, verdict=verdict, details=details.strip()
    )
    return {"role": "user", "content": text.strip()}


def extract_code(answer: str) -> str:
    """The last complete ``python`` (or unlabelled) fenced block of ``answer``."""
    blocks = [b for b in _BLOCK.findall(answer or "") if b.strip()]
    if not blocks:
        raise NoCodeBlock("the answer has no complete ```python code block")
    return blocks[-1].strip() + "\n"
