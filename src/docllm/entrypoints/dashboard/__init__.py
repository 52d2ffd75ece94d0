"""``docllm dashboard``: the operator's web UI (ARCHITECTURE.md, Operator surface), a small Flask (WSGI) app.

WSGI because the worker's HTTP port is the standard library's threaded server: a WSGI app mounts
on it with ``wsgiref`` and no second server (``DOCLLM_DASHBOARD_ON_WORKER``); standalone it runs
under waitress. Server-rendered Jinja templates, static files shipped in the package, no build step.
"""
