"""Thin programs: parse settings, build the container, run a service or a command."""
