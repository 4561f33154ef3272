"""The mm2spec Pulumi program: the resources of one DR spec for this stack's environment.

``main`` declares one ``DisasterRecovery`` component (``mm2spec.pulumi``) from the stack config and
exports the stack outputs; the resources are its children (README.md, "Component"). When the engine
cancels the run (SIGINT), the program ends without a traceback.

Everything lives in the installed package (``mm2spec.provision``) so that Pulumi pickles the
dynamic providers by reference; see README.md in this folder. This folder must stay a plain
program folder: no ``__init__.py``, or it would shadow the ``pulumi`` SDK on ``sys.path``.
"""

from mm2spec.provision.component import main
from mm2spec.provision.program import exit_quietly_when_cancelled

exit_quietly_when_cancelled()
main()
