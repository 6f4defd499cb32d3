"""Corral's code: the pure core, the runtime kit, the services, the client and the CLI.

`CORRAL_CORE=compiled` runs the core's compiled build in place of its sources (`services.compiled_core`): it is
put ahead of them here, before anything imports the core.
"""

import os

from services import compiled_core

CORE_BUILD = compiled_core.load(os.environ, __path__)
"""The build of `services.core` this process runs: "source" or "compiled"."""
