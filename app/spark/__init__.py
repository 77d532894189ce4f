"""Batch dedup on Apache Spark: ``neardup dedup --engine spark`` and the ``spark-submit`` entry.

- ``job``: the run (``run_spark_dedup``) and its ``SparkManifest``.
- ``kernels``: what executors do to Arrow batches (core's kernels; no pyspark).
- ``components``: large-star / small-star connected components on DataFrames.
- ``corpus``: inputs through Spark's readers and their checks; part-file output; Hadoop paths.
- ``entry``: the session, the run and its manifest, for the CLI and ``spark-submit``.
- ``metrics``: shuffle bytes per stage, from the driver's monitoring API.
- ``submit``: the file given to ``spark-submit``.

pyspark is imported only inside these modules' functions, so the base install (without the
``spark`` extra) imports nothing from it.
"""
