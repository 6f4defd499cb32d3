"""`python -m loadtest`: run the load test and print its figures."""

from loadtest.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
