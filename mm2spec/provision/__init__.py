"""Pulumi resources for a DR spec: one module per resource kind, and the program that declares them.

Why the providers live here and not in ``pulumi/``: Pulumi pickles each dynamic provider (with
dill) into the state and unpickles it in a separate provider-host process. Classes in an
importable, installed module pickle *by reference* (``mm2spec.provision.topic.TopicProvider``),
so the state stays small, the host imports the same code the program ran, and a fix here applies
to resources already in the state. Classes defined in the program folder would be pickled *by
value* (their code copied into every resource's state). ``pulumi/__main__.py`` therefore only
calls :func:`mm2spec.provision.component.main`, which declares one ``DisasterRecovery`` component.

Modules (each resource module: the inputs, what forces a replacement, the diff, the provider and its
``KIND``, the ``base.ResourceKind`` everything else reads):

- ``topic``: a Kafka topic (partitions, replication factor -1, configs)
- ``acl``: the ACL bindings of one spec statement on a cluster (name -> operations)
- ``connector``: an MM2 connector registered on the Connect REST API (engine ``connect``)
- ``worker_config``: the Connect worker's ``connect-distributed.properties`` file
- ``spark_deployment``: the Spark mirroring deployment (its job config; engine ``spark``)
- ``files``: the rendered-file provider the two above extend
- ``kinds``: every resource kind by name (``KINDS``), the one list the program, the component, the
  plugin's schema and ``pulumi import`` iterate
- ``base``: the skeleton every provider shares (check, diff, read for refresh, recorded outputs, adoption),
  ``ProvisionedResource``, ``ResourceKind`` and ``ProgramSettings``; a base class changes nothing in the
  state (see its docstring); and the program's garbage-collector thresholds (``fewer_collections``)
- ``connection``: how a provider method reaches a cluster from its inputs (no client kept); which
  clusters a stack touches and their passwords by secret name
- ``reads``: one read of a whole cluster shared by a large refresh's resources (kept per operation)
- ``batch``: group commit: the topic creates (deletes) and ACL creates of resources handled at the
  same time go to their cluster as one request
- ``program``: which resources a spec means, given the live source clusters
- ``component``: ``DisasterRecovery``, those resources as one Pulumi component for any program
  (public path ``mm2spec.pulumi``), and ``main``, the bundled program (one component)
- ``plugin``: ``pulumi-resource-mm2spec``, the same providers served as a real Pulumi provider plugin
  (gRPC; what makes ``pulumi import`` possible)
- ``plugin_package``: the ``mm2spec`` package: resource tokens, schema, the plugin's resource classes
  for programs (``mm2spec:plugin``), import IDs and the import file ``mm2spec plan`` writes
  (``write_import_file``)

May import: ``engines`` (each engine's deployment), ``spec``, ``mm2``, ``render``, ``live``,
``plan`` (the desired resources and the one diff), ``runtime`` (the Spark job), ``errors``,
``components`` and the pulumi SDK. Never ``dev``, ``ops`` or ``cli``; reports through Pulumi,
never prints.
"""
