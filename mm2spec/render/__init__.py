"""render: pure functions from ``DesiredState`` to the files an operator deploys.

- ``connect``: ``connect-distributed.properties``, one ``<flow>-Mirror<Kind>Connector.json`` per
  connector, ``mm2.properties`` for MM2's dedicated mode
- ``spark``: ``spark-mirror.json``, the Spark job's config in MM2's key names
- ``resources``: ``resources.json`` / ``resources.txt``, the internal topics and ACL bindings
- ``kubernetes``: with a ``k8s://`` master, ``kubernetes.yaml`` (the Spark Operator's
  SparkApplication and the ConfigMap with the job config) and the job image's ``Dockerfile``
- ``monitoring``: ``prometheus.yml`` (scrape config), ``prometheus-rules.yml`` (objectives and
  alerts), ``grafana-dashboard.json`` and, for engine connect, ``jmx-exporter.yml`` and
  ``connect-worker.env`` (the worker's java agent setting), every metric
  named from ``mm2spec.mm2.metric_names``
- ``properties``: what those share (client settings, ``java.util.Properties`` text)
- ``repository``: what ``mm2spec init`` writes, a team's DR-spec repository (the spec, its schema,
  the Pulumi project, stacks and program, the CI workflow, pre-commit config, ``.gitignore``, README),
  through ``write_files``
- ``workflow``: the CI workflow of a DR-spec repository (``.github/workflows/dr-spec.yml``: plan comment
  on pull requests, ``pulumi up`` per environment on merge, drift check), from the template
  ``ci-workflow.yml`` that this checkout's example is also written from
- ``files``: every file by name (``render_files``: a ``RenderedFiles``, which owns its folder: the
  next render removes what the last one wrote, by its manifest ``.mm2spec-render.json``, and no
  longer makes), and ``write_files``, the only function here that writes output files (with
  ``check_output_folder``, which ``render`` calls before it reads the spec); the other writes are
  ``repository.check_spec``'s (``init`` puts the new spec and its schema in a temporary folder,
  deleted after, so the loader, which reads files, validates them before anything is written) and
  ``repository.copy_wheel``'s (the wheel ``init --package`` names, copied into the repository)

Passwords are never written: SASL settings use Kafka's EnvVarConfigProvider (``${env:NAME}``), so
the worker (or the Spark job) reads the secret from its environment when it starts.

May import: ``mm2spec.spec`` (the model), ``mm2spec.mm2``, ``mm2spec.errors``,
``mm2spec.components`` (the pinned versions the job image names). Never ``live``
(no cluster is read to render) and never prints.
"""

from mm2spec.render.connect import connectors, mm2_properties, worker_properties
from mm2spec.render.files import engine_files, render_files, write_files
from mm2spec.render.kubernetes import manifests, on_kubernetes
from mm2spec.render.properties import client_properties, properties_text
from mm2spec.render.resources import resources, resources_text
from mm2spec.render.spark import anchor_checkpoint, spark_job_config

__all__ = ["anchor_checkpoint", "client_properties", "connectors", "engine_files", "manifests", "mm2_properties", "on_kubernetes",
           "properties_text", "render_files", "resources", "resources_text", "spark_job_config", "worker_properties",
           "write_files"]
