"""The test kit: what only the integration tests and the benchmarks use, kept out of the wheel.

- ``toxiproxy``: a primary/dr pair behind Toxiproxy, for network faults
- ``ledger``: ledger-checked traffic (every acknowledged record accounted for on the target)
- ``faults``: fault runs (kill -9, broker restarts, cut links) of the Spark mirror under load
- ``acl_matrix``: the least-privilege probe matrix
- ``leases``: a DR pair's lease in memory, fenced as Kafka's transactions fence (unit tests)
- ``wheel``: the built wheel installed in a fresh virtualenv, and its commands run from outside the checkout
- ``spec_shapes``: every field of the spec's schema and values of every type to put there (the fuzzer, unit tests)

Imported as ``tests.kit`` from the project root (pytest runs from there; the benchmarks put the
root on ``sys.path``). May import anything in ``mm2spec``.
"""
