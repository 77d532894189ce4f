"""neardup's algorithms: shingles, MinHash, LSH, union-find, decontamination.

Pure Python + numpy; never imports the web layer. The public surface is ``core.minhash``.
"""
