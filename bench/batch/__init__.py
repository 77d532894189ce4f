"""The batch-run benchmark: ``neardup dedup`` over a large JSON Lines corpus against the common
datasketch recipe (``python -m bench.batch``).
"""
