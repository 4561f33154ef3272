"""Marks this folder as the package ``mm2spec.spark`` (setup.py), so that ``mm2spec.resources`` finds
the Spark mirroring job through ``importlib.resources`` in a wheel and in an editable install alike."""
