"""kafka-python's own integration tests against a slog broker: a compatibility report, not CI.

kafka-python's ``test/integration`` starts Apache Kafka from a downloaded
distribution, or, given ``KAFKA_URI``, uses a broker that is already running.
This runner starts a slog broker and points the suite at it, unchanged:

1. **Source**: ``--source DIR``, a checkout of kafka-python (its PyPI sdist has
   no tests), best the release installed here (``git clone --branch 3.0.12
   https://github.com/dpkp/kafka-python``). Its ``test/``, ``servers/`` and
   ``pyproject.toml`` are copied to a temp dir; nothing of kafka-python lands
   in this repository.
2. **Broker**: one slog broker, id 0 (the fixture's node id), set up as the
   suite's own ``servers/resources/default/kafka.properties`` sets up Kafka:
   ``group.min.session.timeout.ms=1000`` (its group tests use 3 s sessions,
   below Kafka's 6 s floor), ``group.initial.rebalance.delay.ms=0``, two
   offsets-topic partitions, and the ACL authorizer with
   ``allow.everyone.if.no.acl.found=true``.
3. **Environment**: a venv with ``--system-site-packages`` (kafka-python, slog
   and pytest installed here) plus pytest-mock, which the suite's conftest
   needs and this project's tests do not.
4. **Run**: ``pytest test/integration`` with ``KAFKA_VERSION`` (the Kafka version
   the suite gates its tests on and clamps the client to) and ``KAFKA_URI``;
   then the totals and every failure are printed.

Usage::

    python benchmarks/kafka_python_suite.py --source DIR [--kafka-version 4.1]
        [--work-dir DIR] [-- PYTEST ARGS...]
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from suite_support import report, suite_arguments, suite_environment, summarize

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from slog.broker.daemon import start_daemon, stop_daemon  # noqa: E402

SUITE_NEEDS = ["pytest-mock>=3.10"]
BROKER_ID = 0  # the suite's fixture addresses its broker as node 0
# The suite's own server.properties, where slog has the setting.
BROKER_CONFIG = {
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "2",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "num.partitions": "4",
    "authorizer.class.name": "slog",
    "allow.everyone.if.no.acl.found": "true",
}


def prepare(source: Path, work: Path, kafka_version: str) -> Path:
    """The suite's tests and settings in ``work``."""
    if not (source / "test" / "integration" / "conftest.py").exists():
        raise SystemExit(f"{source} is not a kafka-python checkout "
                         "(no test/integration/conftest.py)")
    suite = work / "suite"
    shutil.rmtree(suite, ignore_errors=True)
    shutil.copytree(source / "test", suite / "test",
                    ignore=shutil.ignore_patterns("__pycache__"))
    if (source / "servers").is_dir():
        shutil.copytree(source / "servers", suite / "servers")
    shutil.copy(source / "pyproject.toml", suite / "pyproject.toml")
    # The fixture looks for a Kafka distribution here even for an external broker.
    (suite / "servers" / kafka_version / "kafka-bin").mkdir(parents=True, exist_ok=True)
    return suite


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def main(argv: list[str] | None = None) -> int:
    args = suite_arguments(__doc__, "kafka-python", "4.1").parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="slog-kafka-python-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    suite = prepare(args.source.resolve(), work, args.kafka_version)
    python = suite_environment(work, SUITE_NEEDS)
    data_dir = work / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    bootstrap = f"127.0.0.1:{free_port()}"
    start_daemon(BROKER_ID, data_dir, bootstrap, BROKER_CONFIG, timeout_s=60)
    command = [str(python), "-m", "pytest", "test/integration", "-q", "-p", "no:cacheprovider",
               "-p", "no:asyncio", "-p", "no:hypothesispytest", "-rfEs", "--timeout", "120",
               "-o", "addopts=", *args.pytest_args]
    print(f"kafka-python suite in {suite} against {bootstrap}: {' '.join(command[1:])}",
          flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=suite, capture_output=True, text=True,
                              env={**os.environ, "KAFKA_VERSION": args.kafka_version,
                                   "KAFKA_URI": f"PLAINTEXT://{bootstrap}"})
    finally:
        stop_daemon(BROKER_ID, data_dir)
    (work / "pytest.log").write_text(done.stdout + done.stderr)
    counts, failures = summarize(done.stdout)
    return report(counts, failures, time.monotonic() - started, work / "pytest.log")


if __name__ == "__main__":
    sys.exit(main())
