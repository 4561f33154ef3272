"""The playbook engine: runs a playbook's tasks against a catalogue of modules it is given.

- ``playbook``: load and check a playbook file against the catalogue; ``when`` conditions
- ``module``: what a module is (name, arguments' schema, what it needs, whether it ends the RTO,
  its report sections)
- ``context``: what every task sees: options, selected flows, clients, facts; the variables a
  ``when`` condition may use, each with its meaning and value (``WHEN_VARIABLES``)
- ``runner``: tasks in order, tags, ``when``, check mode, stop on failure
- ``report``: the run's report: per task, recap, RTO, the modules' sections; text, markdown and JSON
"""
