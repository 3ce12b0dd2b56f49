"""A quiet local SparkSession, and clear answers when Java or PySpark is missing."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from slog.core.errors import SlogError

INSTALL_SPARK = "install it with: pip install 'slog[spark]'"
INSTALL_JAVA = "install a JDK 17 (e.g. apt install openjdk-17-jre-headless) or set JAVA_HOME"


class SparkUnavailableError(SlogError, RuntimeError):
    """PySpark or a Java runtime is missing; the message names what to install."""


def java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def check_spark_available() -> None:
    """Raise SparkUnavailableError unless pyspark, pyarrow and java are all there."""
    missing = [m for m in ("pyspark", "pyarrow") if not _importable(m)]
    if missing:
        raise SparkUnavailableError(f"{' and '.join(missing)} not installed; {INSTALL_SPARK}")
    if java_executable() is None:
        raise SparkUnavailableError(f"no Java runtime found (Spark needs one); {INSTALL_JAVA}")


QUIET_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-Dlog4j2.level=ERROR",
    # The Python data source plans in a worker process; reuse it between calls.
    "spark.python.worker.reuse": "true",
}


def spark_session(master: str = "local[*]", app_name: str = "slog", **conf: str) -> Any:
    """Start (or reuse) a SparkSession running workers on this interpreter, quietly."""
    check_spark_available()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**QUIET_CONF, **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from slog.spark import register

    register(spark)
    return spark
