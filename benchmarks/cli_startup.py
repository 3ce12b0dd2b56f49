"""CLI start-up: ``slog --help`` and ``slog topic list`` against ``kcat -L``, same run.

One slog broker is started (``slog.broker.daemon``, temp data dir) with a few
topics. Each command runs ``--runs`` times as a fresh process with stdout piped
(what a script sees: plain output, no colour), alternating the commands so load
on the machine hits them alike. The figure is the median wall time from spawn
to exit, interpreter start-up included; ``python -c pass`` is measured too, as
the floor no Python CLI can go under. CPU time (user + system) is reported too:
it says what the command costs when other work shares the machine and stretches
wall times. Target: both slog commands < 300 ms wall.

Each command runs twice over: under this interpreter, as the developer's
(editable) install sees it, and in a fresh venv that sees slog and its
dependencies through one plain path entry and runs the ``slog`` console script
pip writes, as ``pip install slog`` into a venv gives. The venv skips the
start-up hooks that this interpreter's site-packages runs for every Python
process (an editable install's import finder, and whatever else a machine put
there: ~40 ms on the development machine). The target is judged on the venv
rows, what a user's shell runs.

Bytecode caching is on (.pyc files in a temporary PYTHONPYCACHEPREFIX), as for
an installed tool. ``slog`` is run as ``python -m slog.cli`` so the figure does not include a
version manager's shim (pyenv adds ~50 ms before Python even starts).

Usage::

    python benchmarks/cli_startup.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.brokers import free_port  # noqa: E402

TARGET_S = 0.300
VENV = " (venv)"
JUDGED = (f"slog --help{VENV}", f"slog topic list{VENV}")


def _env(pycache: Path) -> dict[str, str]:
    """Bytecode caching on, as after ``pip install``, with the .pyc files under ``pycache``
    rather than in the source tree (a PYTHONDONTWRITEBYTECODE=1 environment would make
    every run compile every module again)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, timeout=60, env=env)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: "
                           f"{done.stderr.decode(errors='replace')[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


# The console script pip writes for ``slog = "slog.cli.app:main"``.
CONSOLE_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from slog.cli.app import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def clean_install(directory: Path) -> tuple[str, str]:
    """A venv (its python, and its ``slog`` console script as pip writes it) that imports
    slog from this checkout and the dependencies from this interpreter's site-packages,
    without running that site-packages' .pth hooks (a path line in a .pth file only
    extends sys.path)."""
    venv.create(directory, with_pip=False)
    python = directory / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = subprocess.run([python, "-c", where], check=True, capture_output=True,
                             text=True).stdout.strip()
    ours = dict.fromkeys([str(REPO), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    (Path(purelib) / "slog-under-test.pth").write_text("\n".join(ours) + "\n")
    script = directory / "bin" / "slog"
    script.write_text(CONSOLE_SCRIPT.format(python=python))
    script.chmod(0o755)
    return str(python), str(script)


def measure(commands: dict[str, list[str]], runs: int, env: dict[str, str]
            ) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds per command."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for argv in commands.values():  # warm the page cache and write the .pyc files once
        _time(argv, env)
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(_time(argv, env))
    return {name: (statistics.median(w for w, _ in values),
                   statistics.median(c for _, c in values))
            for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    from slog.broker.daemon import start_daemon, stop_daemon

    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        sys.exit("kcat is needed for the comparison (apt-get install kcat)")
    with tempfile.TemporaryDirectory(prefix="slog-cli-startup-") as tmp:
        data_dir = Path(tmp) / "data"
        bootstrap = f"127.0.0.1:{free_port()}"
        start_daemon(1, data_dir, bootstrap, {})
        try:
            slog = [sys.executable, "-m", "slog.cli"]
            subprocess.run([*slog, "topic", "create", "a", "b", "c", "-p", "3",
                            "-b", bootstrap], check=True, capture_output=True)
            clean, installed = clean_install(Path(tmp) / "venv")
            medians = measure({
                "python -c pass": [sys.executable, "-c", "pass"],
                "slog --help": [*slog, "--help"],
                "slog topic list": [*slog, "topic", "list", "-b", bootstrap],
                f"python -c pass{VENV}": [clean, "-c", "pass"],
                f"slog --help{VENV}": [installed, "--help"],
                f"slog topic list{VENV}": [installed, "topic", "list", "-b", bootstrap],
                "kcat -L": [kcat, "-L", "-b", bootstrap],
            }, args.runs, _env(Path(tmp) / "pycache"))
        finally:
            stop_daemon(1, data_dir)
    kcat_s = medians["kcat -L"][0]
    load = os.getloadavg()[0]
    report = {name: {"median_s": round(wall, 4), "median_cpu_s": round(cpu, 4),
                     "vs_kcat": round(wall / kcat_s, 1)}
              for name, (wall, cpu) in medians.items()}
    if args.json:
        print(json.dumps({"runs": args.runs, "target_s": TARGET_S, "load_average": load,
                          "results": report}, indent=2))
    else:
        print(f"{'COMMAND':<25}{'WALL':>8}{'CPU':>8}{'x KCAT':>9}  TARGET   "
              f"({args.runs} runs, medians; load average {load:.1f} on {os.cpu_count()} CPUs)")
        for name, row in report.items():
            verdict = "" if name not in JUDGED else \
                "ok" if row["median_s"] < TARGET_S else "SLOW"
            print(f"{name:<25}{row['median_s'] * 1000:>6.0f}ms{row['median_cpu_s'] * 1000:>6.0f}ms"
                  f"{row['vs_kcat']:>8.1f}x  {verdict}")
    if any(medians[n][0] >= TARGET_S for n in JUDGED):
        sys.exit(1)


if __name__ == "__main__":
    main()
