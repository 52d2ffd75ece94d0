"""Review and reports: the answer's schema, the prompt, the Chat Completions body, chunks, rubrics,
the report, and scoring a reviewer (``evaluation``, ``eval_run``) or a CI check (``checking``)."""
