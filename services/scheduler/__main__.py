"""`python -m services.scheduler`: run a scheduler instance (active or standby; settings from `CORRAL_*`)."""

import sys

from services.runtime.runner import run_service
from services.scheduler.app import main

if __name__ == "__main__":
    sys.exit(run_service("scheduler", main))
