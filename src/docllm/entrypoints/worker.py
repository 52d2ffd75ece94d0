"""``python -m docllm.entrypoints.worker``: worker slots plus the reaper and reconciler loops."""

from __future__ import annotations

from docllm.entrypoints.bootstrap import build_container, load_settings, prepare_schema
from docllm.runtime.service import Service


def main(workers: bool = True, reaper: bool = True) -> int:
    container = build_container(load_settings())
    prepare_schema(container)
    service = Service(container, workers=workers, reaper=reaper)
    service.install_signal_handlers()
    service.start().wait()
    container.shutdown_resources()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
