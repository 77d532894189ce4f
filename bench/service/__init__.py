"""The service benchmarks: HTTP ingest, recovery, memory per document and query latency at 1M
documents against datasketch (``python -m bench.service``), and query latency while a large
batch registers (``python -m bench.service.ingest_latency``).
"""
