"""librdkafka's integration suite against a slog cluster: a compatibility report, not CI.

1. **Source**: by default Debian's source package (``apt-get source
   librdkafka``, after enabling deb-src for this machine's release; bookworm
   ships 2.0.2), or ``--source DIR``, an existing librdkafka tree (e.g. a
   checkout of a newer release). The tree is copied into ``--build-dir``;
   nothing of librdkafka ever lands in this repository.
2. **Build**: installs the Debian -dev packages the build needs (only the
   missing ones, printed), then ``./configure``, ``make -j2 libs`` and
   ``make -j2 -C tests build``. A second run with the same ``--build-dir``
   reuses the build (make redoes only what is out of date).
3. **Cluster**: ``slog cluster up --brokers 3 -c num.partitions=4 -c
   default.replication.factor=3`` with racks ``RACK1..3`` and Kafka's
   ``RackAwareReplicaSelector`` (the suite's default scenario, as its own
   cluster scripts set it up), the ACL authorizer with
   ``allow.everyone.if.no.acl.found=true``, on a private data dir and free
   ports, and a ``test.conf`` naming them.
4. **Tests**: every broker test number, one ``test-runner`` process each (so
   a hung test costs only its own ``--timeout``), NON-quick (no ``-Q``), with
   ``-L`` (leave out the local-only tests, which use librdkafka's mock
   cluster and never talk to slog), ``TEST_KAFKA_VERSION`` (default 4.1.0,
   so that version-gated tests run), ``--parallel`` 1 or 2 at a time. Tests
   that need ``KAFKA_PATH`` (a Kafka distribution, to run Kafka's own tools)
   and share-group (KIP-932) tests are reported as skipped with that reason.
5. **Report**: a table of test, pass/fail/skip and the reason (the failing
   assertion or skip line the harness printed), totals, the wall time, and
   how many fencings the controller logged (``fencing broker N: reason`` in
   the brokers' ``broker.log``); ``--json FILE`` writes the same as JSON.
   Then the cluster is stopped.

Usage::

    python benchmarks/librdkafka_suite.py [--source DIR] [--build-dir DIR]
        [--tests 0001,0002] [--parallel 1|2] [--timeout S] [--json FILE]
    python benchmarks/librdkafka_suite.py --from-logs BUILD_DIR/logs/RUN [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.brokers import free_port_range  # noqa: E402

BUILD_PACKAGES = ["build-essential", "pkg-config", "python3", "libssl-dev", "zlib1g-dev",
                  "libzstd-dev", "liblz4-dev", "libsasl2-dev", "rapidjson-dev"]  # JSON tests
CLUSTER_CONFIG = ["num.partitions=4", "default.replication.factor=3",
                  # The suite's cluster gives broker N the rack RACK<N> and turns on
                  # fetch-from-follower (0101 skips itself otherwise).
                  "replica.selector.class="
                  "org.apache.kafka.common.replica.RackAwareReplicaSelector",
                  # Kafka's default (slog's is 0 for quick local joins): the tests'
                  # rebalance counts assume members that start together join together.
                  "group.initial.rebalance.delay.ms=3000",
                  # An authorizer, as the suite's own Kafka clusters run one (0081
                  # creates, lists and deletes ACLs); with no ACL on a resource anyone
                  # may use it, so the other tests' clients need no login.
                  "authorizer.class.name=slog", "allow.everyone.if.no.acl.found=true"]
RACKS = ",".join(f"RACK{n}" for n in range(1, 4))
BROKERS = 3
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# |<name> | <STATE> | <duration>s |<reason>: the harness's summary table (tests/test.c)
SUMMARY_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*([A-Z_]+)\s*\|\s*([\d.]+)s\s*\|\s?(.*)$")
TEST_ENTRY = re.compile(r"_TEST\(\s*(\d{4}\w*)\s*,\s*([^,)]*)")
FAILED_BLOCK = re.compile(r'^### Test "([^"]+)" failed at (\S+) at .*###$')
KNOWN_ISSUE = re.compile(r"TEST_F_KNOWN_ISSUE\b")  # not the _WIN32/_OSX variants
KILLED_MARK = "### slog report: test-runner killed after "
FENCING = re.compile(r"fencing broker (\d+): ([^;\n]*)")


@dataclass
class Row:
    test: str
    result: str  # pass, fail, skip, timeout
    seconds: float
    reason: str


def say(message: str) -> None:
    print(message, flush=True)


def run(cmd: list[str], cwd: Path | None = None, **kwargs: object) -> None:
    say(f"$ {' '.join(cmd)}" + (f"   (in {cwd})" if cwd else ""))
    subprocess.run(cmd, cwd=cwd, check=True, **kwargs)  # type: ignore[call-overload]


# -- 1. source ---------------------------------------------------------------------------------
def debian_source(workdir: Path) -> Path:
    """``apt-get source librdkafka`` after enabling deb-src for this release."""
    codename = next((line.split("=", 1)[1].strip() for line in
                     Path("/etc/os-release").read_text().splitlines()
                     if line.startswith("VERSION_CODENAME=")), "")
    if not codename:
        raise SystemExit("cannot tell the Debian release (no VERSION_CODENAME in /etc/os-release)")
    sources = Path("/etc/apt/sources.list.d/slog-deb-src.list")
    if not sources.exists():
        line = f"deb-src http://deb.debian.org/debian {codename} main\n"
        say(f"enabling deb-src: {sources}: {line.strip()}")
        sources.write_text(line)
        run(["apt-get", "update"])
    install_missing(["dpkg-dev"])
    workdir.mkdir(parents=True, exist_ok=True)
    run(["apt-get", "source", "librdkafka"], cwd=workdir)
    trees = sorted(p for p in workdir.iterdir() if p.is_dir() and p.name.startswith("librdkafka-"))
    if not trees:
        raise SystemExit(f"apt-get source left no librdkafka-* directory in {workdir}")
    return trees[-1]


def install_missing(packages: list[str]) -> bool:
    """apt-get install what is not installed yet; True if anything was."""
    missing = [p for p in packages if subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True
    ).stdout.strip() != "install ok installed"]
    if not missing:
        say(f"build packages already installed: {' '.join(packages)}")
        return False
    say(f"installing: {' '.join(missing)}")
    run(["apt-get", "install", "-y", "--no-install-recommends", *missing],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    return True


# -- 2. build ----------------------------------------------------------------------------------
def build(source: Path, build_dir: Path) -> Path:
    """Copy ``source`` into ``build_dir/src-tree`` once, build it; returns its tests dir."""
    tree = build_dir / "src-tree"
    if not (tree / "configure").exists():
        say(f"copying {source} to {tree}")
        shutil.copytree(source, tree, symlinks=True)
    installed = install_missing(BUILD_PACKAGES)
    if installed or not (tree / "Makefile.config").exists():  # configure sees what is there
        run(["./configure", "--disable-gssapi"], cwd=tree)
    started = time.monotonic()
    run(["make", "-j2", "libs"], cwd=tree, stdout=subprocess.DEVNULL)
    run(["make", "-j2", "-C", "tests", "build"], cwd=tree, stdout=subprocess.DEVNULL)
    say(f"build up to date ({time.monotonic() - started:.0f} s)")
    return tree / "tests"


# -- 3. cluster --------------------------------------------------------------------------------
def slog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slog.cli", *args], capture_output=True,
                          text=True)


def cluster_up(data_dir: Path, base_port: int) -> str:
    args = ["cluster", "up", "--brokers", str(BROKERS), "--data-dir", str(data_dir),
            "--base-port", str(base_port), "--timeout", "120", "--racks", RACKS]
    for setting in CLUSTER_CONFIG:
        args += ["-c", setting]
    say(f"$ slog {' '.join(args)}")
    result = slog(*args)
    if result.returncode != 0:
        raise SystemExit(f"slog cluster up failed:\n{result.stdout}{result.stderr}")
    return ",".join(f"127.0.0.1:{base_port + i}" for i in range(BROKERS))


def cluster_down(data_dir: Path) -> None:
    say(f"$ slog cluster down --data-dir {data_dir}")
    result = slog("cluster", "down", "--data-dir", str(data_dir))
    if result.returncode != 0:
        say(f"slog cluster down failed:\n{result.stdout}{result.stderr}")


def fencings(broker_logs: list[Path]) -> list[tuple[int, str]]:
    found = []
    for log in sorted(broker_logs):
        found += [(int(b), why) for b, why in FENCING.findall(log.read_text(errors="replace"))]
    return found


# -- 4. tests ----------------------------------------------------------------------------------
def broker_tests(tests_dir: Path) -> tuple[list[str], list[str], list[str]]:
    """(broker, share-group, known-issue) test numbers, from the harness's test table."""
    text = (tests_dir / "test.c").read_text(errors="replace")
    table = text[text.index("struct test tests[]"):]
    by_number: dict[str, list[tuple[str, str]]] = {}
    for name, flags in TEST_ENTRY.findall(table):
        by_number.setdefault(name[:4], []).append((name, flags))
    broker, share, known = [], [], []
    for number, entries in sorted(by_number.items()):
        wanted = [(n, f) for n, f in entries
                  if "TEST_F_LOCAL" not in f and "TEST_F_MANUAL" not in f]
        if not wanted:
            continue
        if all("share" in n for n, _ in wanted):
            share.append(number)
        elif all(KNOWN_ISSUE.search(f) for _, f in wanted):
            known.append(number)  # the harness leaves these out unless run with -k
        else:
            broker.append(number)
    return broker, share, known


def parse_summary(output: str) -> list[Row]:
    rows = []
    for line in ANSI.sub("", output).splitlines():
        match = SUMMARY_ROW.match(line.strip())
        if not match or match.group(1) == "<MAIN>":
            continue
        name, state, seconds, reason = match.groups()
        reason = reason.strip().rstrip("|").strip()
        if reason == "Filtered due to negative test flags":
            continue  # a local-only variant of this number, left out by -L
        result = {"PASSED": "pass", "FAILED": "fail", "SKIPPED": "skip"}.get(state, "fail")
        if state not in ("PASSED", "FAILED", "SKIPPED"):
            reason = f"{state.lower()} at the end of the run {reason}".strip()
        rows.append(Row(name, result, float(seconds), reason))
    return rows


def needs_kafka_path(row: Row) -> Row:
    """A test that runs Kafka's own tools (kafka-topics.sh...) cannot run against slog."""
    if row.result == "skip" or "KAFKA_PATH" not in row.reason:
        return row
    return Row(row.test, "skip", row.seconds,
               f"needs KAFKA_PATH (a Kafka distribution): {row.reason}")


def harness_failure(output: str) -> tuple[str, str] | None:
    """(test, reason) from the harness's ``### Test "X" failed at ...: ###`` block, which is
    all there is when a failure (or the harness's own timeout) ends the run early."""
    lines = [line.strip() for line in ANSI.sub("", output).splitlines()]
    blocks = []
    for i, line in enumerate(lines):
        match = FAILED_BLOCK.match(line)
        if match:
            reason = next((n for n in lines[i + 1:] if n), "")
            test, _, subtest = match.group(1).partition(" ")
            blocks.append((test, f"{subtest + ': ' if subtest else ''}{reason} "
                                 f"({match.group(2)})"[:300]))
    # "<MAIN>" fails after a test too (clients it left running): the test's own block first
    own = [b for b in blocks if b[0] != "<MAIN>"]
    if own:
        return own[0]
    return blocks[0] if blocks else None


def last_line(output: str) -> str:
    lines = [line.strip() for line in ANSI.sub("", output).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def run_one(tests_dir: Path, number: str, env: dict[str, str], timeout_s: float,
            logs: Path) -> list[Row]:
    started = time.monotonic()
    proc = subprocess.Popen(["./test-runner", "-p1", "-L"], cwd=tests_dir,
                            env={**env, "TESTS": number}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace",
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    elapsed = time.monotonic() - started
    if timed_out:
        output += f"\n{KILLED_MARK}{timeout_s:.0f} s\n"
    (logs / f"{number}.log").write_text(output)
    return rows_from_output(number, output, elapsed, proc.returncode)


def rows_from_output(number: str, output: str, elapsed: float, returncode: int) -> list[Row]:
    if KILLED_MARK in output:
        last = last_line(output[:output.rindex(KILLED_MARK)])
        return [Row(number, "timeout", elapsed, f"killed after "
                    f"{output.rsplit(KILLED_MARK, 1)[1].strip()}; last line: {last}")]
    rows = parse_summary(output)
    if not rows and "SUMMARY" in output and "### Test" not in output:
        return [Row(number, "skip", elapsed, "the harness filtered out every variant")]
    if not rows:
        failure = harness_failure(output)
        rows = [Row(number if failure[0] == "<MAIN>" else failure[0], "fail", elapsed,
                    failure[1])] if failure else \
            [Row(number, "fail", elapsed, f"exit {returncode} without a summary; last "
                 f"line: {last_line(output)}")]
    return [needs_kafka_path(row) for row in rows]


# -- 5. report ---------------------------------------------------------------------------------
def print_table(rows: list[Row]) -> None:
    width = max([len(r.test) for r in rows] + [4])
    say(f"\n{'test':<{width}}  {'result':<7}  {'secs':>7}  reason")
    for row in rows:
        say(f"{row.test:<{width}}  {row.result:<7}  {row.seconds:7.1f}  {row.reason}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path,
                        help="an existing librdkafka source tree (default: apt-get source)")
    parser.add_argument("--build-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "slog-librdkafka",
                        help="where the tree is copied and built; reused across runs")
    parser.add_argument("--tests", help="comma-separated test numbers (default: all)")
    parser.add_argument("--parallel", type=int, choices=(1, 2), default=1)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test number")
    parser.add_argument("--kafka-version", default="4.1.0", help="TEST_KAFKA_VERSION")
    parser.add_argument("--timeout-multiplier", type=float, default=2.0,
                        help="test.timeout.multiplier in test.conf (a slow shared machine)")
    parser.add_argument("--base-port", type=int, help="first broker port (default: free ports)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--from-logs", type=Path,
                        help="only print the report of an earlier run's log directory")
    options = parser.parse_args()
    if options.from_logs:
        return report_from_logs(options.from_logs, options)

    build_dir = options.build_dir.resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    source = options.source.resolve() if options.source else debian_source(build_dir / "debian")
    tests_dir = build(source, build_dir)
    numbers, share, known = broker_tests(tests_dir)
    if options.tests:
        picked = {t.strip()[:4] for t in options.tests.split(",") if t.strip()}
        numbers, share, known = ([n for n in group if n in picked]
                                 for group in (numbers, share, known))

    data_dir = Path(tempfile.mkdtemp(prefix="slog-rdk-data-"))
    logs = build_dir / "logs" / time.strftime("%Y%m%d-%H%M%S")
    logs.mkdir(parents=True)
    base_port = options.base_port or free_port_range(BROKERS)
    started = time.monotonic()
    rows: list[Row] = [Row(n, "skip", 0.0, "share groups (KIP-932): slog has none")
                       for n in share]
    rows += [Row(n, "skip", 0.0, "known issue in librdkafka's table: the harness runs it "
                 "only with -k") for n in known]
    try:
        bootstrap = cluster_up(data_dir, base_port)
        conf = build_dir / "slog-test.conf"
        conf.write_text(f"metadata.broker.list={bootstrap}\n"
                        f"test.timeout.multiplier={options.timeout_multiplier}\n")
        env = {**os.environ, "RDKAFKA_TEST_CONF": str(conf),
               "TEST_KAFKA_VERSION": options.kafka_version,
               "LD_LIBRARY_PATH": "../src:../src-cpp", "RDKAFKA_GITVER": "slog-report"}
        say(f"running {len(numbers)} test number(s) against {bootstrap}, "
            f"{options.parallel} at a time; output in {logs}")
        with ThreadPoolExecutor(options.parallel) as pool:
            futures = [pool.submit(run_one, tests_dir, n, env, options.timeout, logs)
                       for n in numbers]
            for future in futures:
                got = future.result()
                for row in got:
                    say(f"  {row.test}: {row.result} ({row.seconds:.1f} s) {row.reason[:120]}")
                rows += got
    finally:
        cluster_down(data_dir)
    wall_s = time.monotonic() - started
    for log in data_dir.glob("brokers/*/broker.log"):  # kept with the test output
        shutil.copy(log, logs / f"broker-{log.parent.name}.log")
    shutil.rmtree(data_dir, ignore_errors=True)
    report(rows, fencings(list(logs.glob("broker-*.log"))), wall_s, options, str(source))
    return 0


def report_from_logs(logs: Path, options: argparse.Namespace) -> int:
    """The report again from a run's saved output (``--from-logs``), e.g. after a parser fix."""
    rows = []
    for log in sorted(logs.glob("[0-9][0-9][0-9][0-9].log")):
        rows += rows_from_output(log.stem, log.read_text(errors="replace"), 0.0, -1)
    report(rows, fencings(list(logs.glob("broker-*.log"))), float("nan"), options, str(logs))
    return 0


def report(rows: list[Row], fenced: list[tuple[int, str]], wall_s: float,
           options: argparse.Namespace, source: str) -> None:
    rows.sort(key=lambda r: r.test)
    totals = Counter(r.result for r in rows)
    print_table(rows)
    say(f"\ntotals: {len(rows)} tests, " + ", ".join(
        f"{totals[k]} {k}" for k in ("pass", "fail", "timeout", "skip")))
    say(f"wall time {wall_s / 60:.1f} min; fencings logged by the controller: {len(fenced)}"
        + (" (" + "; ".join(f"broker {b}: {why}" for b, why in fenced) + ")" if fenced else ""))
    if options.json:
        options.json.write_text(json.dumps({
            "source": source, "kafka_version": options.kafka_version,
            "cluster": {"brokers": BROKERS, "config": CLUSTER_CONFIG},
            "wall_s": None if wall_s != wall_s else round(wall_s, 1), "totals": dict(totals),
            "fencings": [{"broker": b, "reason": why} for b, why in fenced],
            "tests": [asdict(r) for r in rows]}, indent=2))
        say(f"report written to {options.json}")


if __name__ == "__main__":
    sys.exit(main())
