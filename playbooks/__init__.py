"""Marks this folder as the package ``mm2spec.playbooks`` (setup.py), so that ``mm2spec.resources`` finds
the bundled playbooks through ``importlib.resources`` in a wheel and in an editable install alike."""
