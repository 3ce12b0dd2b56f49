"""``slog spark-export`` as a user runs it: its own process, its own JVM, quiet output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess, run_cli
from tests.spark.support import create_topic, produce_confluent, read_back, unique

BLOCK_PYSPARK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError("No module named 'pyspark'")
sys.meta_path.insert(0, Block())
from slog.cli.app import main
sys.argv = ["slog", *sys.argv[1:]]
main()
"""


@pytest.mark.timeout(900)  # its own JVM: seconds normally, minutes on a loaded machine
def test_export_in_its_own_process_is_quiet(spark_broker: BrokerProcess,
                                            tmp_path: Path) -> None:
    topic = unique("process")
    create_topic(spark_broker.bootstrap, topic)
    produced = produce_confluent(spark_broker.bootstrap, topic, 250, codec="lz4")
    result = run_cli("spark-export", topic, "--out", str(tmp_path / "out"), "--master",
                     "local[1]", "--data-dir", str(spark_broker.data_dir), timeout=850)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no JVM banner, no log4j lines, no progress bar off a TTY
    table = result.stdout.splitlines()
    assert table[0].split()[:4] == ["RUN", "RECORDS", "BYTES", "FILES"]
    assert table[1].split()[1] == "250"
    assert len(read_back(tmp_path / "out")) == len(produced)


def test_missing_java_or_pyspark_names_what_to_install(spark_broker: BrokerProcess,
                                                      tmp_path: Path) -> None:
    topic = unique("nojava")
    create_topic(spark_broker.bootstrap, topic)
    args = ["spark-export", topic, "--out", str(tmp_path / "o"),
            "--data-dir", str(spark_broker.data_dir)]
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # python, but no java
    no_java = subprocess.run([sys.executable, "-m", "slog.cli", *args], env=env,
                             capture_output=True, text=True, timeout=120)
    assert no_java.returncode == 1
    assert "no Java runtime found" in no_java.stderr and "JDK 17" in no_java.stderr
    assert "Traceback" not in no_java.stderr
    no_spark = subprocess.run([sys.executable, "-c", BLOCK_PYSPARK, *args],
                              capture_output=True, text=True, timeout=120)
    assert no_spark.returncode == 1, no_spark.stderr
    assert "pyspark not installed" in no_spark.stderr
    assert "pip install 'slog[spark]'" in no_spark.stderr
    assert "Traceback" not in no_spark.stderr
    assert not (tmp_path / "o").exists()


def test_cli_never_imports_pyspark_at_start_up() -> None:
    code = ("import sys, slog.cli.app, slog.cli.spark_cmd, slog.spark; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pyspark', 'pyarrow', 'pandas'))))")
    result = subprocess.run([sys.executable, "-c", "import json; " + code],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
