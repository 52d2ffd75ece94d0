"""Runtime: one asyncio event loop per process drives the domain services in production (the
dispatcher, attempts as coroutines, one heartbeat timer, the reaper and reconciler loops); blocking
port calls run on a bounded thread pool (docs/RUNTIME.md). The simulation runs the same ``Service``
on a virtual-time loop."""
