"""The modules a playbook calls, one file per module family, and what they share.

- ``catalogue``: every module by name (what the playbook engine is given)
- ``mirror``, ``offsets``, ``acls``, ``state``, ``failback``, ``verify``: the module families
- ``translate``: the exact offset walk
- ``sections``: what the offset modules add to the report (translations and totals, the RPO, silent loss)
- ``loss``: silent loss: records the source deleted before they were mirrored, source topics recreated
- ``reverse``: the failback's copy back
- ``topology``: what a flow mirrors now (partitions, groups, syncs, checkpoints), its reverse flows (active-active)
- ``exporter``: the DR exporter (``verify --serve``): RPO, checkpoint age, failover state, clusters up, for Prometheus
"""
