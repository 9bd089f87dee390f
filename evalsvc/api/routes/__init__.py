"""The gateway's HTTP routes, one router per module; the plumbing they share (auth, deps, limits,
problems, the Redis clients, the enqueuer) stays in `evalsvc.api`."""
