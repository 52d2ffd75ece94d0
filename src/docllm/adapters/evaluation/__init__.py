"""``docllm eval``'s files: expectations YAML and the golden set directory (docs/EVAL.md)."""
