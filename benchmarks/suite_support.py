"""What the runners of client libraries' own test suites share: their venv and report."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path


def suite_arguments(doc: str, client: str, kafka_version: str) -> argparse.ArgumentParser:
    """The options every suite runner takes: the client's checkout, the Kafka version the
    suite gates its tests on, where to work, and pytest's own arguments after --."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--source", type=Path, required=True,
                        help=f"{client}'s source (a git checkout)")
    parser.add_argument("--kafka-version", default=kafka_version,
                        help="the Kafka version the suite gates its tests on")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the copy, the venv and any data dir go (kept; default a "
                             "temp dir)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    return parser


def suite_environment(work: Path, needs: list[str]) -> Path:
    """A venv over this interpreter's packages (the clients, slog and pytest installed
    here) plus the suite's own plugins, which so never load in slog's own runs."""
    venv = work / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       check=True)
    if needs:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *needs], check=True)
    return python


def summarize(output: str) -> tuple[dict[str, int], list[str]]:
    """pytest's closing counts and its FAILED/ERROR lines."""
    counts: dict[str, int] = {}
    for line in reversed(output.splitlines()):
        if re.search(r"\d+ (passed|failed)", line):
            counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", line)}
            break
    failures = [line for line in output.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return counts, failures


def report(counts: dict[str, int], failures: list[str], seconds: float, log: Path) -> int:
    """Print the totals and every failure; the exit status: 0 when all passed."""
    print(f"{seconds:.0f} s; " + ", ".join(f"{n} {word}" for word, n in counts.items())
          + f" (full output: {log})")
    for line in failures:
        print(f"  {line}")
    return 0 if counts.get("passed") and not failures else 1
