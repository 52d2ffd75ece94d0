"""Benchmarks of docllm against the floor and against RQ, Dramatiq and Celery: ``python -m bench``.

One module per measurement (floor, queue_only, worker, profile, peers, reaper_cost, recovery);
``bench/__main__.py`` runs them on one redis-server and one MariaDB and prints a table each.
docs/BENCHMARKS.md holds the current figures, a section per question, each with its command.
"""
