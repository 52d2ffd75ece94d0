"""``docllm`` run in-process for the CLI tests: the exit code, stdout and stderr of one command."""

from __future__ import annotations

import gc
from collections.abc import Callable

from docllm.entrypoints.cli import main


def cli_runner(capsys) -> Callable[..., tuple[int, str, str]]:
    def run(*argv: str) -> tuple[int, str, str]:
        # Garbage of earlier tests in this process (an HTTP pool nobody closed) logs when it is
        # collected; collect it now, outside the command whose stderr is checked line by line.
        gc.collect()
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run
