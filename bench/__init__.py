"""Benchmarks for neardup, one package each: ``bench.signatures`` (the signature kernel against
datasketch and rensa), ``bench.service`` (the HTTP service against datasketch's LSH) and
``bench.batch`` (``neardup dedup`` against the datasketch recipe); ``bench.common`` holds what
they share."""
