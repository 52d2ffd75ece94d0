"""Where events go: logs and Prometheus metrics."""
