"""Where the OpInfo suite's first mapping build spends its time, one OpInfo at a time.

For each OpInfo of ``op_db`` that supports the dtype on the device: the seconds to
enumerate its samples and the seconds to run them under the dispatch recorder (all
three variants), the samples and mapped variants it yields. Stops at ``--budget``
seconds and writes what it has (``--json``), so a run that cannot finish still says
which OpInfos cost the most.

Usage: python benchmarks/reproduce/opinfo_mapping_profile.py --device cuda --dtype float32 \
           --kind sample --budget 240 --json $OUT/opinfo-map-profile.json

Committed result: ``benchmarks/results/opinfo-map-profile-h200.json`` (an H200):
    python benchmarks/reproduce/opinfo_mapping_profile.py --device cuda --dtype float32 \
        --kind sample --budget 240 --json benchmarks/results/opinfo-map-profile-h200.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--kind", default="sample", choices=["sample", "reference"])
    p.add_argument("--budget", type=float, default=240.0, help="seconds")
    p.add_argument("--json", default=None, help="write the per-OpInfo rows here")
    p.add_argument("--verbose", action="store_true", help="name each OpInfo as it starts")
    ns = p.parse_args()

    import torch

    from opbench.suites import opinfo as oi

    warnings.simplefilter("ignore")
    dtype = oi._dtype_from_name(ns.dtype)
    device_type = torch.device(ns.device).type
    t_start = time.perf_counter()
    db = oi._op_db()
    import_s = time.perf_counter() - t_start
    rows: list[dict] = []
    done = True
    for info in db:
        if time.perf_counter() - t_start > ns.budget:
            done = False
            break
        try:
            if dtype not in info.supported_dtypes(device_type):
                continue
        except Exception:
            continue
        if ns.verbose:
            print("...", info.name, info.variant_test_name, file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            samples = oi._enumerate(info, ns.device, dtype, ns.kind, 0)
        except Exception as e:
            rows.append({"opinfo": info.name, "error": f"{type(e).__name__}: {e}"[:200]})
            continue
        if device_type == "cuda":
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        entries = 0
        for s in samples:
            try:
                entries += len(oi._map_one(info, s, ns.device))
            except Exception:
                pass
        if device_type == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        rows.append(
            {
                "opinfo": info.name
                + (f".{info.variant_test_name}" if info.variant_test_name else ""),
                "enumerate_s": round(t1 - t0, 4),
                "map_s": round(t2 - t1, 4),
                "samples": len(samples),
                "entries": entries,
            }
        )
    total = time.perf_counter() - t_start
    rows.sort(key=lambda r: -(r.get("enumerate_s", 0) + r.get("map_s", 0)))
    summary = {
        "device": torch.cuda.get_device_name(0) if device_type == "cuda" else "cpu",
        "torch": torch.__version__,
        "dtype": ns.dtype,
        "kind": ns.kind,
        "finished": done,
        "opinfos_done": len(rows),
        "opinfos_in_db": len(db),
        "import_op_db_s": round(import_s, 2),
        "total_s": round(total, 1),
        "enumerate_s": round(sum(r.get("enumerate_s", 0) for r in rows), 1),
        "map_s": round(sum(r.get("map_s", 0) for r in rows), 1),
        "entries": sum(r.get("entries", 0) for r in rows),
        "slowest": rows[:25],
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "slowest"}, indent=1))
    for r in rows[:25]:
        print(r)
    if ns.json:
        Path(ns.json).write_text(json.dumps({**summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
