"""The name teams' own Pulumi programs import: ``from mm2spec.pulumi import DisasterRecovery``.

The component itself is ``mm2spec.provision.component`` (see its docstring and pulumi/README.md,
"Component"); this module only gives it a short, stable public path. Needs the ``pulumi`` extra.
"""

from mm2spec.provision.component import DisasterRecovery

__all__ = ["DisasterRecovery"]
