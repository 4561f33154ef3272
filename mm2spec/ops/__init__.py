"""ops: DR operations (playbooks: verify, failover, failback) run from the spec. Empty for now.

Will hold the playbook engine and its module catalogue; playbooks themselves are YAML data in the
repository's ``playbooks/`` folder. May import ``spec``, ``mm2``, ``live``, ``plan``, ``runtime``,
``errors``; never ``cli`` and never prints (a run returns its report; the CLI shows it).
"""
