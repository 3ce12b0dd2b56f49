"""aiokafka's own test suite against a slog broker: a compatibility report, not CI.

aiokafka's functional tests start Apache Kafka in a Docker image and drive it
through scripts inside the container (kafka-acls.sh, kafka-configs.sh). This
runner points them at slog instead, unchanged:

1. **Source**: ``--source DIR``, a checkout of aiokafka (its PyPI sdist has no
   tests), best the release installed here (``git clone --branch v0.14.0
   https://github.com/aio-libs/aiokafka``). Its ``tests/`` and ``pyproject.toml``
   are copied to a temp dir; nothing of aiokafka lands in this repository.
2. **Fixtures**: ``aiokafka_suite_fixtures.py`` (next to this script) is copied
   beside them and imported at the end of the suite's ``conftest.py``, so its
   fixtures replace the Docker ones: one slog broker (id 0, as the image's) with
   PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners, the image's users, the
   ACL authorizer, openssl-made certificates, and ``slog acl`` / ``slog user`` in
   place of the container's scripts. Kerberos tests skip (slog has no GSSAPI).
3. **Environment**: a venv with ``--system-site-packages`` (the aiokafka, slog
   and pytest installed here) plus what the suite's conftest needs and this
   project's tests do not (pytest-asyncio, pytest-mock, docker's client
   library, async-timeout), so the suite's plugins never load in slog's own runs.
4. **Run**: ``pytest tests --docker-image slog:2.13_<--kafka-version>`` (the
   suite reads the Kafka version it gates tests on from the image tag), then
   the totals and every failure are printed.

Usage::

    python benchmarks/aiokafka_suite.py --source DIR [--kafka-version 4.1.0]
        [--work-dir DIR] [-- PYTEST ARGS...]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from suite_support import report, suite_arguments, suite_environment, summarize

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIXTURES = HERE / "aiokafka_suite_fixtures.py"
SUITE_NEEDS = ["pytest-asyncio>=1.0", "pytest-mock>=3.10", "docker>=7", "async-timeout>=4"]


def prepare(source: Path, work: Path) -> Path:
    """The suite's tests and pytest settings in ``work``, wired to slog's fixtures."""
    if not (source / "tests" / "conftest.py").exists():
        raise SystemExit(f"{source} is not an aiokafka checkout (no tests/conftest.py)")
    suite = work / "suite"
    shutil.rmtree(suite, ignore_errors=True)
    shutil.copytree(source / "tests", suite / "tests",
                    ignore=shutil.ignore_patterns("ssl_cert", "__pycache__"))
    shutil.copy(source / "pyproject.toml", suite / "pyproject.toml")
    shutil.copy(FIXTURES, suite / "aiokafka_suite_fixtures.py")
    conftest = suite / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + "\n\n# slog: the broker under test\n"
                        "from aiokafka_suite_fixtures import *  # noqa: E402,F401,F403\n")
    return suite


def main(argv: list[str] | None = None) -> int:
    args = suite_arguments(__doc__, "aiokafka", "4.1.0").parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="slog-aiokafka-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    suite = prepare(args.source.resolve(), work)
    python = suite_environment(work, SUITE_NEEDS)
    command = [str(python), "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", "-rfEs",
               "--timeout", "120", "--docker-image", f"slog:2.13_{args.kafka_version}",
               *args.pytest_args]
    print(f"aiokafka suite in {suite}: {' '.join(command[1:])}", flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=suite, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    (work / "pytest.log").write_text(done.stdout + done.stderr)
    counts, failures = summarize(done.stdout)
    return report(counts, failures, time.monotonic() - started, work / "pytest.log")


if __name__ == "__main__":
    sys.exit(main())
