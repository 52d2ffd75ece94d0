"""``docllm dashboard``: the operator's web UI (ARCHITECTURE.md, Operator surface), a small Flask (WSGI) app.

WSGI, served by the process's own HTTP server (``runtime/http_server.py``): on the worker's port
beside ``/metrics`` (``DOCLLM_DASHBOARD_ON_WORKER``) or on its own port (``docllm dashboard``).
Server-rendered Jinja templates, static files shipped in the package, no build step.
"""
