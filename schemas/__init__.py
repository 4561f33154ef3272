"""Marks this folder as the package ``mm2spec.schemas`` (setup.py), so that ``mm2spec.resources`` finds
the JSON Schemas through ``importlib.resources`` in a wheel and in an editable install alike."""
