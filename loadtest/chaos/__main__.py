"""`python -m loadtest.chaos`: the chaos run."""

from loadtest.chaos.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
