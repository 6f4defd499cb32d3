"""`python -m loadtest.floor --nats-url URL`: the floor's decider, in a process of its own."""

from loadtest.floor.decider import main

if __name__ == "__main__":
    raise SystemExit(main())
