"""The scheduler service: the only allocator; decides requests with the core, one active instance under a lease."""
