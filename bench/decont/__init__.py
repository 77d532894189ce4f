"""Decontamination modes benchmark (``python -m bench.decont``)."""
