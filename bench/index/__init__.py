"""The persistent index benchmark (``python -m bench.index``): an incremental run against a
rerun of everything."""
