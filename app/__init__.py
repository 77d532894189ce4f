"""neardup's interfaces: the HTTP service and the ``neardup`` command line."""
