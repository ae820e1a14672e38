"""Where opbench keeps what it can rebuild: ``$OPBENCH_CACHE_DIR``, else
``~/.cache/opbench``. Read by the suites (the OpInfo mapping, trace dry-run verdicts,
downloaded traces) and the roofline (measured peaks); each names its own files under it.
A leaf: it imports nothing of opbench.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """``OPBENCH_CACHE_DIR`` (``~`` expanded) or ``~/.cache/opbench``."""
    env = os.environ.get("OPBENCH_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "opbench"
