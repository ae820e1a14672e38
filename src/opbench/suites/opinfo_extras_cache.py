"""The quick OpInfo profile's derived cases, kept on disk per machine.

The quick profile adds to each elementwise (overload, variant) group a ``layout`` case
and a ``values`` case (:func:`opbench.suites.opinfo_extras.elementwise_extras`), made by
building the group's largest sample and running eager PyTorch on it. On CUDA that is the
OpInfo's sample enumeration over again, serially in the harness, after the mapping built
them in other processes: on a 4 x H100 host (2026-11-27) the float32 build sat past
150 s there, where the mapping itself took 40 s. What a group derives depends only on
its cases (their test ids, which hold their seed), the device type and torch, so it is
kept like the mapping (:mod:`opbench.suites.opinfo_mapping`), under ``OPBENCH_CACHE_DIR``,
one file per device type and dtype, and only the groups it lacks are built.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import torch

from opbench.cache import cache_dir
from opbench.suites.case import Case

__all__ = ["ExtrasCache", "group_key"]

log = logging.getLogger(__name__)

#: Bumped when the rules that derive the cases change (invalidates the files).
EXTRAS_VERSION = 1


def group_key(group: list[Case]) -> str:
    """A group's identity: its cases' test ids (op, inputs and seed), in order."""
    return hashlib.sha1("|".join(sorted(c.test_id for c in group)).encode()).hexdigest()


class ExtrasCache:
    """The derived cases of one device type and dtype, by :func:`group_key`."""

    def __init__(self, device_type: str, dtype_name: str, mapping_version: int) -> None:
        ver = torch.__version__.replace("+", "_")
        tag = f"{device_type}-{dtype_name}-m{mapping_version}-e{EXTRAS_VERSION}"
        self.path: Path = cache_dir() / f"opinfo-extras-{ver}-{tag}.json"
        self._groups: dict[str, list[dict[str, Any]]] = {}
        self._changed = False
        if self.path.exists():
            try:
                self._groups = json.loads(self.path.read_text())
            except (OSError, ValueError):
                log.warning("ignoring unreadable OpInfo extras cache %s", self.path)

    def get(self, key: str) -> list[Case] | None:
        """The group's derived cases, or None when this group was never built here."""
        found = self._groups.get(key)
        return None if found is None else [Case.from_dict(d) for d in found]

    def put(self, key: str, cases: list[Case]) -> None:
        self._groups[key] = [c.to_dict() for c in cases]
        self._changed = True

    def save(self) -> None:
        """Write what was added (atomically: a build killed midway leaves the old file)."""
        if not self._changed:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._groups))
            tmp.replace(self.path)
        except OSError as e:
            log.warning("could not cache the OpInfo extras in %s: %s", self.path, e)
        self._changed = False
