"""Marks this folder as the package ``mm2spec.versions`` (setup.py), so that ``mm2spec.resources``
finds versions.env through ``importlib.resources`` in a wheel and in an editable install alike."""
