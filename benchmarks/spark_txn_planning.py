"""read_committed planning of Spark's dataDir mode on one large transactional partition:
the last stable offset found by ``--before``'s code against ``--after``'s (each a source
tree, imported in a fresh process per run), on the same files.

The partition is :mod:`benchmarks.txn_state_restart`'s worst case (single-record
transactional batches, every tenth transaction aborted, 64 MB segments with a
producer-state snapshot at each roll) without the snapshot a clean close writes at
the log end: the files as a running broker leaves them. Also timed: the filter of one
task reading the whole partition (``uncommitted_batches``).

    python -m benchmarks.spark_txn_planning --before ../main --after . \\
        --data-dir /tmp/planning-data --batches 300000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.txn_state_restart import TOPIC, _generate

_TIME = """
import sys, time
from pathlib import Path
from slog.spark.segments import log_bounds
from slog.spark.transactions import last_stable_offset, uncommitted_batches
directory = Path(sys.argv[1])
bounds = log_bounds(directory)
began = time.perf_counter()
stable = last_stable_offset(directory, bounds.start, bounds.end)
planned = time.perf_counter()
uncommitted_batches(directory, bounds.start, stable)
print(stable, planned - began, time.perf_counter() - planned)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--batches", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reuse", action="store_true", help="time the data of an earlier run")
    args = parser.parse_args()
    directory = args.data_dir / f"{TOPIC}-0"
    if not args.reuse:
        shutil.rmtree(args.data_dir, ignore_errors=True)
        _generate(directory, args.batches)
        end = max(int(p.stem) for p in directory.glob("*.snapshot"))
        (directory / f"{end:020d}.snapshot").unlink()  # the clean close's, at the log end
    print(f"{len(list(directory.glob('*.log')))} segments, "
          f"{len(list(directory.glob('*.snapshot')))} snapshots, "
          f"{len(list(directory.glob('*.txnindex')))} .txnindex files", flush=True)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    stables: dict[str, set[str]] = {name: set() for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree)}
            # cwd: sys.path starts with it, and must not bring the other tree in
            out = subprocess.run([sys.executable, "-c", _TIME, str(directory)], cwd=tree,
                                 env=env, capture_output=True, text=True, check=True)
            stable, plan, task = out.stdout.split()
            stables[name].add(stable)
            times[name].append((float(plan), float(task)))
    assert stables["before"] == stables["after"] and len(stables["after"]) == 1, stables
    for i, figure in enumerate(("planning (last stable offset)", "whole-log task filter")):
        before, after = (statistics.median(t[i] for t in times[n]) for n in trees)
        print(f"{figure}, median of {args.rounds}: before {before * 1000:.0f} ms, "
              f"after {after * 1000:.0f} ms, ratio {before / after:.1f}x", flush=True)


if __name__ == "__main__":
    main()
