"""Cold starts of the command and the server (``python -m bench.coldstart``)."""
