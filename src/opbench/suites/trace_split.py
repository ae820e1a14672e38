"""The traces split in two, by model: a *tuning* half that tuners may read, and a
*held-out* half that results are reported on.

Why: the reference backend's per-shape tables were tuned on the suite's most used rows and
measured on the same rows (1.152x eager); on rows of models it had not seen it read
1.042x, with convolutions at 0.32x. A number is only evidence of speed on shapes the
tuner did not see.

The split is fixed and written down in ``trace_split.json`` beside this module: within
each trace folder (``hf_train``, ``timm_train``, ``torchbench_train``), the model names
(file stems) sorted by the SHA-256 of the name, every other one held out
(:func:`make_split`), so each folder contributes about half its models to each side and
the rule can be checked against the files at any time. A model traced in two folders is
held out only where every copy is.

Rows, not only models, must stay apart: an (operator, arguments) row that any tuning
model uses is a tuning row, whichever other models use it too. The held-out rows are those
used *only* by held-out models (:func:`select`), so nothing a tuner saw is reported as
held out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "HALVES",
    "SPLIT_FILE",
    "half_of",
    "load_split",
    "make_split",
    "select",
    "without_heldout",
]

SPLIT_FILE = Path(__file__).with_name("trace_split.json")
HALVES = ("tuning", "heldout")


def _key(model: str) -> str:
    return hashlib.sha256(model.encode()).hexdigest()


def make_split(root: str | Path) -> dict[str, Any]:
    """The split of the trace folder ``root`` by the written-down rule (see the module
    docstring): ``{"rule": ..., "tuning": {folder: [models]}, "heldout": {...}}``."""
    root = Path(root)
    tuning: dict[str, list[str]] = {}
    heldout: dict[str, list[str]] = {}
    folders = sorted({p.parent for p in root.rglob("*.txt")})
    for folder in folders:
        name = str(folder.relative_to(root)) if folder != root else "."
        models = sorted((p.stem for p in folder.glob("*.txt")), key=_key)
        heldout[name] = sorted(models[1::2])
        tuning[name] = sorted(models[0::2])
    # a model traced in two folders (resnet18, densenet121 in timm and torchbench) is one
    # model: held out only if every folder holds it out
    tuned = {m for models in tuning.values() for m in models}
    for name, models in heldout.items():
        moved = [m for m in models if m in tuned]
        heldout[name] = [m for m in models if m not in tuned]
        tuning[name] = sorted(tuning[name] + moved)
    return {
        "rule": "per folder, model names sorted by sha256(name); odd positions held out, "
        "unless another folder's copy of the model is tuning",
        "tuning": tuning,
        "heldout": heldout,
    }


@cache
def load_split() -> dict[str, str]:
    """Model name -> ``"tuning"`` or ``"heldout"``, from :data:`SPLIT_FILE`."""
    data = json.loads(SPLIT_FILE.read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for half in HALVES:
        for models in data[half].values():
            for m in models:
                out[m] = half
    return out


def half_of(model: str) -> str | None:
    """The half a model (a trace file's stem) belongs to; None for a model outside the
    155 split ones (a user's own traces)."""
    return load_split().get(model)


def select(entries: Iterable[Any], half: str) -> list[Any]:
    """The entries (:class:`~opbench.suites.traces.TraceEntry`) of one half.

    ``tuning``: the entries of tuning models. ``heldout``: the entries of held-out models
    whose (operator, arguments) row no tuning model uses. Entries of models outside the
    split are in neither half. Raises ``ValueError`` for an unknown half."""
    if half not in HALVES:
        raise ValueError(f"unknown trace split {half!r}: expected one of {', '.join(HALVES)}")
    entries = list(entries)
    if half == "tuning":
        return [e for e in entries if any(half_of(m) == "tuning" for m in e.all_models)]
    tuned = {(e.op, e.args) for e in entries if any(half_of(m) == "tuning" for m in e.all_models)}
    return [
        e
        for e in entries
        if (e.op, e.args) not in tuned and all(half_of(m) == "heldout" for m in e.all_models)
    ]


def without_heldout(entries: Iterable[Any]) -> list[Any]:
    """What a tuner may read: every entry whose row is not a held-out row (so the tuning
    half, plus traces of models outside the split, such as a user's own)."""
    entries = list(entries)
    held = {(e.op, e.args) for e in select(entries, "heldout")}
    return [e for e in entries if (e.op, e.args) not in held]
