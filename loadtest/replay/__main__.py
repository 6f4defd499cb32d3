"""`python -m loadtest.replay`: the start-up replay benchmark."""

from loadtest.replay.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
