"""Packaging beyond what pyproject.toml can say statically: mm2spec's data folders ship in the wheel.

The repository keeps ``schemas/``, ``playbooks/`` and ``spark/`` at the top level (the team's
layout); the wheel carries them inside the package, where ``mm2spec.resources`` finds them through
``importlib.resources``. pyproject.toml cannot combine package discovery with such a mapping, so
it is declared here; everything else (metadata, dependencies, the entry point) is in pyproject.toml.
An editable install (``pip install -e .``, as scripts/setup does) maps the same names onto the
checkout's folders, so the code finds its data the same way in both.
"""

from setuptools import find_packages, setup

#: Package name inside the wheel -> folder of the checkout. Each folder holds an ``__init__.py``:
#: setuptools' editable finder resolves only regular packages it maps (a namespace package's
#: placeholder path breaks ``importlib.resources`` on Python 3.11).
DATA_PACKAGES = {
    "mm2spec.schemas": "schemas",
    "mm2spec.playbooks": "playbooks",
    "mm2spec.spark": "spark",
    "mm2spec.versions": "scripts",
}
#: What each data package ships besides its ``__init__.py``; scripts/ gives only the pinned versions.
#: (mm2spec.render, a code package, also ships a data file.)
DATA_FILES = {
    "mm2spec.schemas": ["*.json", "README.md"],
    "mm2spec.playbooks": ["*.yaml", "README.md"],
    "mm2spec.spark": ["README.md", "java/**/*.java"],
    "mm2spec.versions": ["versions.env"],
    "mm2spec.render": ["ci-workflow.yml"],  # the CI workflow's template (mm2spec init)
}

#: Code packages inside the data folders: the Spark job's own package, which spark-submit ships to
#: the executors. Declared as packages (not matched as data), so setuptools builds them as code.
DATA_CODE_PACKAGES = ["mm2spec.spark.mm2spark"]

setup(
    packages=find_packages(include=["mm2spec", "mm2spec.*"]) + list(DATA_PACKAGES) + DATA_CODE_PACKAGES,
    package_dir=DATA_PACKAGES,
    package_data=DATA_FILES,
    # The package data is exactly DATA_FILES. With setuptools' default (True for pyproject.toml
    # projects) every file of the sdist inside a package is data too, and the Java sources' folders
    # (java/mm2spec/spark/...) read as Python packages missing from `packages` ("Package would be
    # ignored" warnings), though they are only files the Spark job compiles.
    include_package_data=False,
)
