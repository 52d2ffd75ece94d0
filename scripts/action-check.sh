#!/usr/bin/env bash
# The command line of the GitHub Action (action.yml): `docllm check` with the annotations format, so each
# finding shows on its line in the pull request; and, when asked, the same review as SARIF (--sarif).
# Its exit code is docllm's: 0 clean, 1 a finding at DOCLLM_FAIL_ON or above, 2 an error.
set -euo pipefail

# Spaces or newlines between paths (a YAML block scalar is how a workflow lists them); no globbing.
read -r -d '' -a paths <<<"${DOCLLM_PATHS:-.}" || true
if [[ ${#paths[@]} -eq 0 ]]; then
  echo "docllm check: the paths input names no file or directory" >&2
  exit 2
fi
args=("${paths[@]}" --fail-on "${DOCLLM_FAIL_ON:-high}")
if [[ -n "${DOCLLM_RUBRIC_NAME:-}" ]]; then
  args+=(--rubric "$DOCLLM_RUBRIC_NAME")
fi
if [[ -n "${DOCLLM_CHANGED_FROM:-}" ]]; then
  args+=(--changed-from "$DOCLLM_CHANGED_FROM")
fi

if [[ -n "${DOCLLM_SARIF:-}" ]]; then
  args+=(--sarif "$DOCLLM_SARIF")  # the same review, written twice: an LLM reviewer is paid once
fi
exec docllm check "${args[@]}" --format github
