"""``--shard K/N``: part K of N of a run's selected tests, a stable split by test id.

Why: a run over every held-out trace row (6,712 tests, about 70 minutes of one H200 at
0.6 s a test, 2026-12-02) outlasts a lend of a GPU machine (30 minutes a session, 10 a
call). Split by a hash of each test's id, the parts are fixed whatever else is judged,
disjoint, and together every test of the unsharded run; each part is a run of its own
(its own directory, ``--resume`` within it), judged on any machine on any day, and the
reports of the parts are merged (``benchmarks/reproduce/heldout_report.py --merge``).
Parts are mixed by the hash, so every part holds every op's rows in about equal shares:
a part cut short still says something about every op.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["in_shard", "parse_shard"]

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` as ``(K, N)``, 1 <= K <= N; a ValueError that says what is wrong else."""
    m = _SHARD.match(text or "")
    if not m:
        raise ValueError(f"--shard {text!r}: expected K/N, as 1/4 (part 1 of 4)")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"--shard {text!r}: K must be 1..N and N at least 1")
    return k, n


def in_shard(test_id: str, k: int, n: int) -> bool:
    """Whether the test ``test_id`` falls in part ``k`` of ``n`` (1-based): a hash of the
    whole id, not Python's ``hash`` (salted per process), so every machine agrees."""
    h = int.from_bytes(hashlib.sha256(test_id.encode()).digest()[:8], "big")
    return h % n == k - 1
