"""``python -m docllm.entrypoints.reaper``: the reaper and reconciler alone, for separate deployment."""

from __future__ import annotations

from docllm.entrypoints.worker import main as _run


def main() -> int:
    return _run(workers=False, reaper=True)


if __name__ == "__main__":
    raise SystemExit(main())
