"""live: the only code that talks to running clusters.

- ``kafka``: the one AdminClient wrapper (futures resolved in one place, batched reads, typed errors)
- ``wire``: DescribeConfigs of many topics over Kafka's protocol without synonyms (``kafka``'s
  ``topic_configs``: a tenth of the AdminClient's CPU at 10,000 topics), with SASL PLAIN and SCRAM
- ``connect``: the Kafka Connect REST client
- ``records``: exact offset ranges of partitions, consumer-group offsets and members
- ``writer``: an idempotent producer to explicit partitions (a failback's copy back)
- ``dr_state``: the failover record kept on the DR cluster, and the mirrored topics' IDs
- ``lease``: one DR operation at a time per DR pair: a fenced lease in the DR-state topic
- ``traffic``: a drill's synthetic load (a rate-limited producer, groups that move between clusters)
- ``kubernetes``: the API server through kubectl (the Spark Operator's manifests)
- ``types``: what was read, as plain types (``LiveTopic``, ``Record``, ``FailoverState``),
  importable without any client library

May import: ``mm2spec.spec`` (the model), ``mm2spec.mm2`` (retries, chunking), ``mm2spec.errors``,
``mm2spec.components`` (kubectl), confluent-kafka, urllib. Never ``plan``, ``provision``, ``cli``;
never prints.
"""

# Here rather than in ``kafka`` so that the CLI can show it as a default without loading the client
# library. A cluster that answers at all answers metadata and describe calls within seconds; 15 s
# leaves room for a broker busy with a leader election. The default for plans and providers.
KAFKA_REQUEST_TIMEOUT_S = 15.0
