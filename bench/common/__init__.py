"""What the benchmarks share: machine facts, the server launcher (also used by tests/e2e), the
seeded corpus, latency summaries, memory readings and the size options."""
