"""What mm2spec leaves beside a Spark flow's checkpoint folder for the Spark job to read.

A failback restarts the forward mirror from the source's end: it sets the flow's checkpoint folder
aside and writes ``<checkpoint folder>.start-offsets.json`` next to it (``mm2spec.engines.spark``);
the job (``spark/mm2spark/pipeline.py``) starts a flow that has no checkpoint of its own from
those offsets. Both sides read the name and the layout here, so they cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

START_OFFSETS_SUFFIX = ".start-offsets.json"
"""Appended to a flow's checkpoint folder name: the file with the offsets its new query starts at."""


def start_offsets_file(checkpoint: Path) -> Path:
    """The start-offsets file of the flow whose checkpoint folder is ``checkpoint`` (beside it)."""
    return checkpoint.with_name(f"{checkpoint.name}{START_OFFSETS_SUFFIX}")


def start_offsets_json(offsets: Mapping[tuple[str, int], int]) -> str:
    """The file's content: ``{topic: {partition: offset}}``, partitions as strings (JSON keys)."""
    layout: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in offsets.items():
        layout.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(layout, sort_keys=True)
