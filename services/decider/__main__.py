"""`python -m services.decider`: run a decision worker (settings from `CORRAL_*`; `corral up` starts
`CORRAL_DECISION_WORKERS` of them)."""

import sys

from services.decider.app import main
from services.runtime.runner import run_service

if __name__ == "__main__":
    sys.exit(run_service("decider", main))
