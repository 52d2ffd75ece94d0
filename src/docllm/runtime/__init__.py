"""Runtime: threads that drive the domain services in production (the simulation drives them itself)."""
