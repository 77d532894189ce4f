"""``neardup``, the command line: serve, dedup, contamination, push, query.

Modules: ``main`` (flags and dispatch), ``serve``, ``dedup`` (the batch run), ``contamination``
(the report), ``remote`` (push and query through the typed client), ``inputs`` (reading corpus
files in batches), ``progress`` (progress bars).
"""

from neardup.app.cli.main import main

__all__ = ["main"]
