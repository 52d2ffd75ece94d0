"""Runtime: one asyncio event loop per process drives the domain services (the worker's dispatcher and
attempts, heartbeats, the reaper's and reconciler's loops); blocking port calls go to a bounded thread
pool (``port_calls``). The simulation runs the same runtime on virtual time (``sim/aio.py``)."""
