"""live: the only code that talks to running clusters.

- ``kafka``: the one AdminClient wrapper (futures resolved in one place, batched reads, typed errors)
- ``connect``: the Kafka Connect REST client
- ``state``: what was read, as plain types (``LiveTopic``), importable without any client library

May import: ``mm2spec.spec`` (the model), ``mm2spec.errors``, confluent-kafka, urllib.
Never ``plan``, ``provision``, ``cli``; never prints.
"""
