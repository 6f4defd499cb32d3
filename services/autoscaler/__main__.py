"""`python -m services.autoscaler`: run an autoscaler instance (active or standby; settings from `CORRAL_*`, node
types from the YAML file `CORRAL_AUTOSCALER_CONFIG` names)."""

import sys

from services.autoscaler.app import main
from services.runtime.runner import run_service

if __name__ == "__main__":
    sys.exit(run_service("autoscaler", main))
