"""Mutation testing (``make mutation``): mutmut on core/, app/service/ and app/spark/.

``python -m tests.mutation`` runs each package in a working directory of its own under
``.mutation/`` (mutmut's ``mutants/`` copy, its results and the list of survivors), each with
only the fast tests that cover it, and prints the kill rate per package and the time taken.
TRIAGE.md beside this file is the triage of the survivors: the equivalent mutants (named there,
with the reason) are counted apart, every other survivor is to be killed by a test.
"""
