"""`python -m services.vclusters`: run the vclusters service (settings from `CORRAL_*` variables)."""

import sys

from services.runtime.runner import run_service
from services.vclusters.app import main

if __name__ == "__main__":
    sys.exit(run_service("vclusters", main))
