"""Benchmarks for neardup: a seeded corpus generator, the signature kernel against peers, and
the HTTP service (ingest, recovery, memory per document, query latency) against datasketch."""
