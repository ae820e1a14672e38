# Source on a lent GPU machine (no package index there) before the benchmark scripts:
# puts opbench's source on the import path and, when carried in .gpu_data/bin, the
# bubblewrap binary on PATH, and prints what the machine has.
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
[ -d .gpu_data/bin ] && export PATH="$PWD/.gpu_data/bin:$PATH"
opbench() { python3 -m opbench.cli "$@"; }
# opbench's cache (the OpInfo mapping: 102-114 s to build over every dtype on an H200)
# outside the working tree: a folder the device tool carries is replaced on every call,
# so a cache kept in one was rebuilt by every call (2026-11-28)
export OPBENCH_CACHE_DIR="${OPBENCH_CACHE_DIR:-/tmp/opbench-cache}"
mkdir -p "$OPBENCH_CACHE_DIR"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'gpus', torch.cuda.device_count())"
python3 -c "from opbench.run import sandbox; print('bwrap usable:', sandbox.bwrap_works())"
# Wheels the GPU machine lacks, when carried (download them on the CPU machine first):
#   pip download --no-deps expecttest -d .whl/ex
#   pip download --no-deps flag_gems==5.0.2 sqlalchemy greenlet typing_extensions \
#       --python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64 \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl/fg
# Ray for --executor ray (79 MB wheel: over the 64 MiB a call may carry): download
#   pip download --no-deps ray==2.60.0 jsonschema jsonschema-specifications referencing \
#       rpds-py --python-version 3.12 --only-binary=:all: --platform manylinux2014_x86_64 -d /tmp/rw
# then rewrite the ray wheel into .whl/ray without ray/{jars,dashboard/client,rllib,llm,
# serve,train,tune,data}/ (and those RECORD lines): 39 MB; install it on the GPU machine with
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/ray/*.whl
#   export PYTHONPATH=$PYTHONPATH:/tmp/site
# py-spy (stacks of a benchmark run that times out, gpu_workers.run):
#   pip download --no-deps --only-binary=:all: --platform manylinux2014_x86_64 py-spy -d .whl/pyspy
for d in .whl/ex .whl/fg .whl/pyspy; do
  if [ -d "$d" ]; then python3 -m pip install -q --no-deps --no-index "$d"/*.whl; fi
done
# pack_run RUN_DIR OUT.tgz: a run directory, cut short or not, as one file to bring back
# from $OUT and --resume from in the next call. The store is SQLite in WAL mode: copying
# results.sqlite alone loses what the WAL still holds (a run was lost that way on 2026-11-25), so
# the store goes through SQLite's backup API first.
pack_run() {
  python3 - "$1" <<'PY'
import sqlite3, sys, pathlib
run = pathlib.Path(sys.argv[1]); db = run / "results.sqlite"
src = sqlite3.connect(db); dst = sqlite3.connect(run / "results.sqlite.bak")
src.backup(dst); dst.close(); src.close()
(run / "results.sqlite.bak").replace(db)
for extra in ("results.sqlite-wal", "results.sqlite-shm"):
    (run / extra).unlink(missing_ok=True)
PY
  tar czf "$2" -C "$(dirname "$1")" "$(basename "$1")"
}
