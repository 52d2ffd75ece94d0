"""The deterministic crash simulation of docllm (``python -m sim.crash_scenarios``).

It drives the real domain services and the real adapters (RedisTaskQueue on fakeredis with Lua,
SqlAlchemyTaskRepository on in-memory SQLite, wired through the container); only time, the LLM
and faults are simulated. docs/SIMULATION.md says how to run it and how to read its table.
"""
