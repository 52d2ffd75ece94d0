"""Services over the ports: one attempt's steps, the reaper, the reconciler, submit and operator moves."""
