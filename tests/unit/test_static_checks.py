"""The linter and the type checker, run by the test suite so that the README's one test
command (which CI runs) checks them too. Their settings live in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _passes(*command: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=280
    )
    if result.returncode != 0:
        pytest.fail(f"`{' '.join(command)}` failed:\n{result.stdout}{result.stderr}",
                    pytrace=False)


def test_ruff_finds_nothing() -> None:
    _passes("ruff", "check", "slog", "tests", "benchmarks")


def test_mypy_finds_nothing() -> None:
    # No arguments: the files and the strict packages come from [tool.mypy].
    _passes("mypy")
