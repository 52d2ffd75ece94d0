"""What the host gives a process: its CPU budget (cgroups, affinity) and its parent's death."""
