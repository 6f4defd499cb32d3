"""`python -m services.labels`: run the labels service (settings from `CORRAL_*` variables)."""

import sys

from services.labels.app import main
from services.runtime.runner import run_service

if __name__ == "__main__":
    sys.exit(run_service("labels", main))
