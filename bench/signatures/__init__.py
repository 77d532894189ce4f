"""The signature kernel benchmark: neardup against datasketch and rensa, then workers=2 vs 1.

Run with ``python -m bench.signatures`` (see ``bench/signatures/__main__.py``).
"""
