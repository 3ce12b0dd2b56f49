"""Spark integration: the ``slog`` PySpark data source and the export job.

Nothing here imports pyspark at import time; :func:`register` and the modules
that need it do so when called.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Make ``spark.read.format("slog")`` and ``spark.readStream.format("slog")`` work."""
    from slog.spark.datasource import SlogDataSource

    spark.dataSource.register(SlogDataSource)
