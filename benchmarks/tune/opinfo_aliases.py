"""Rebuild ``src/opbench/suites/opinfo_aliases.json``: for each ATen op (base name), the
OpInfos whose samples reach it, read from full OpInfo mappings already built and cached
(``OPBENCH_CACHE_DIR`` or ``~/.cache/opbench``, ``opinfo-*.json``; any torch version,
device, kind and dtype: the union is kept).

Why: ``opbench run --suite opinfo --ops LIST`` maps only the OpInfos it needs, found by
name (``relu`` -> ``nn.functional.relu``); an op no OpInfo is named after
(``_softmax``, reached from ``softmax``; ``convolution``, from ``nn.functional.conv2d``)
used to force the full mapping of all ~700 OpInfos per dtype: about a minute per dtype on
CPU and, on a fresh H100, more than 4 minutes for float16 alone. With this table the
mapping covers the same OpInfos a full mapping would use for the asked ops, in seconds.

Usage: python benchmarks/tune/opinfo_aliases.py [CACHE_FILES...]

Writes into ``src/``: ``src/opbench/suites/opinfo_aliases.json``.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

from opbench.spec.ops import base_name

OUT = Path(__file__).resolve().parents[2] / "src" / "opbench" / "suites" / "opinfo_aliases.json"


def main() -> int:
    files = sys.argv[1:]
    if {"-h", "--help"} & set(files):
        print(__doc__)
        return 0
    if not files:
        root = os.environ.get("OPBENCH_CACHE_DIR") or str(Path.home() / ".cache" / "opbench")
        files = sorted(glob.glob(f"{root}/opinfo-*.json"))
    if not files:
        print("no cached OpInfo mappings: run an opinfo suite once without --ops")
        return 1
    reach: dict[str, set[str]] = defaultdict(set)
    for f in files:
        for e in json.loads(Path(f).read_text()):
            reach[base_name(e["op"]).rstrip("_") or base_name(e["op"])].add(e["opinfo"])
    table = {
        "about": "ATen op base name -> the OpInfos whose samples reach it; built by "
        "benchmarks/tune/opinfo_aliases.py from full mappings: "
        + ", ".join(sorted({Path(f).name.rsplit("-", 1)[0] for f in files})),
        "aliases": {k: sorted(v) for k, v in sorted(reach.items())},
    }
    OUT.write_text(json.dumps(table, indent=0, sort_keys=False) + "\n")
    print(f"wrote {OUT}: {len(reach)} ops from {len(files)} mappings")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
