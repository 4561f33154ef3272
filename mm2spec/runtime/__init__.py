"""runtime: running the Spark mirroring job on this machine.

- ``job``: the job's command line, its config (rendered or from a file) and the config hash
- ``deployment``: start / stop / status of the job's driver in the background, the foreground run, and
  pausing / resuming some of its flows (the control file the job reads)
- ``process``: pid, port and wait helpers, shared with ``mm2spec.dev``

May import: ``mm2spec.spec`` and ``mm2spec.render`` (to render a job from a spec),
``mm2spec.components``, ``mm2spec.resources`` (the Spark job's files), ``mm2spec.errors``.
Never ``cli``, ``plan``, ``provision`` or ``dev``; never prints (the CLI reports what these
functions return).
"""
