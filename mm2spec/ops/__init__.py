"""ops: DR operations (verify, failover, failback, the drill) run from the spec.

- ``playbooks``: the playbook engine: load and check a playbook, the run context, the runner
  (tags, ``when``, check mode, stop on failure) and the report; it names no module
- ``modules``: the catalogue of modules a playbook calls, and the offset algorithms they share
- ``drill``: a DR drill under synthetic load, judged by what it reads itself, and its report

Playbooks themselves are YAML data in the repository's ``playbooks/`` folder.
May import ``engines``, ``plan``, ``runtime``, ``render``, ``live``, ``spec``, ``mm2``, ``errors``,
``resources``; never ``provision``, ``dev`` or ``cli``; never prints (a run returns its report;
the CLI shows it).
"""
