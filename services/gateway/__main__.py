"""`python -m services.gateway`: serve the HTTP API (settings from `CORRAL_*` variables, `CORRAL_HTTP_PORT` first)."""

import sys

from services.gateway.app import main

if __name__ == "__main__":
    sys.exit(main())
