"""Benchmarks for neardup: a seeded corpus generator and the signature kernel against peers."""
