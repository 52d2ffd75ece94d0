"""Documents read from files at submit."""
