"""The Spark engine against the local engine on one corpus (``python -m bench.spark``)."""
