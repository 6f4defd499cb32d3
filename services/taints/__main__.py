"""`python -m services.taints`: run the taints service (settings from `CORRAL_*` variables)."""

import sys

from services.runtime.runner import run_service
from services.taints.app import main

if __name__ == "__main__":
    sys.exit(run_service("taints", main))
