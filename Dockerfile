# The docllm image: one program, three roles (`docllm worker`, `docllm reaper`, `docllm init-db`).
#
# No container engine runs on the development machine, so this file is not built there:
# tests/unit/test_deploy_files.py parses it and checks it against the settings and the CLI.
# See docs/DEPLOY.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /build
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install . && rm -rf /build

RUN useradd --create-home --uid 10001 --user-group docllm \
    && mkdir -p /home/docllm/.docllm && chown docllm:docllm /home/docllm/.docllm
USER docllm
WORKDIR /home/docllm

# Defaults for a container; compose.yaml (or the orchestrator) sets Redis, MySQL and the LLM.
ENV DOCLLM_HOME=/home/docllm/.docllm \
    DOCLLM_LOG_FORMAT=json \
    DOCLLM_METRICS_HOST=0.0.0.0 \
    DOCLLM_METRICS_PORT=9464
EXPOSE 9464

# Liveness: /healthz fails when a reaper loop stalls or a worker slot dies (init-db serves no port).
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('DOCLLM_METRICS_PORT', ''); sys.exit(0) if port in ('', '0') else urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4)"]

# SIGTERM (docker stop) drains: no new claims, in-flight attempts get DOCLLM_SHUTDOWN_GRACE_SECONDS.
STOPSIGNAL SIGTERM
CMD ["docllm", "worker"]
