"""Rubrics read from YAML files (``DOCLLM_RUBRICS_DIR``)."""
