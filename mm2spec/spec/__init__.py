"""spec: a DR spec file -> ``DesiredState``. No network, no processes, nothing printed.

- ``document``: YAML -> a tree whose every value knows FILE:LINE:COL; JSON Pointers
- ``overlay``: environments as JSON Merge Patches on that tree (mirrors merge by name)
- ``validate``: ``Diagnostic``, environments, ``resolve``, ``validate`` (every problem at once)
- ``schema``: JSON Schema errors rewritten into actionable messages (``validate`` runs it)
- ``rules``: the semantic rules, one function per spec section (``validate`` runs them)
- ``patterns``: Java regexes (validity, literal / prefix / regex classification)
- ``secrets``: the one rule for which keys hold secrets, and masking
- ``model``: the desired state as frozen dataclasses
- ``compile``: a valid document -> ``DesiredState``
- ``load``: the single load -> resolve -> validate -> compile path every caller uses
- ``promote``: environment promotion (differences the overlays intend vs. changes carried)

May import: ``mm2spec.mm2``, ``mm2spec.errors``, ``mm2spec.resources`` (the JSON Schemas), the
standard library, pyyaml and jsonschema.
Never a network client (confluent_kafka, urllib.request, pulumi, pyspark) and never ``live``.
"""
