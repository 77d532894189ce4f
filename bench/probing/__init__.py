"""What a read key can learn of a protected passage by probing: ``python -m bench.probing``."""
