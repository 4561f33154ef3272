"""plan: desired resources against live state, as data, and its renderings.

- ``desired``: the concrete resources a spec asks for given a snapshot of its source clusters
  (topics each flow mirrors, target topics, regex ACLs resolved to names)
- ``diff``: the one diff (topics, ACLs, connectors) used by ``plan`` and the Pulumi providers
- ``model``: ``Plan``, ``ResourceChange``, ``ClusterInfo``, ``FlowSummary`` (typed, documented fields)
- ``build``: ``build_plan`` reads the live clusters (through ``live``) and returns a ``Plan``
- ``formats``: a ``Plan`` as text, markdown (Mermaid) or JSON; pure functions

May import: ``spec``, ``mm2``, ``live``, ``errors``; never ``engines`` (above it: the engine's part
of a plan, its connectors or its job, is handed to ``build_plan``). Only ``build`` reads live
clusters; ``desired``, ``diff``, ``model`` and ``formats`` import no client library. Never prints.
"""
