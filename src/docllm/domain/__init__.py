"""The pure domain: task model, policies, ports and services. No infrastructure imports."""
