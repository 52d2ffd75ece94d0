"""``--plot FILE.png``: one run's per-task timeline (claims, crashes, reclaims, commits).

matplotlib is imported here only, so the harness runs without it.
"""

from __future__ import annotations

from typing import Any

MARKERS = {  # kind -> (marker, colour, label)
    "claim": ("|", "tab:gray", "claimed"),
    "crash": ("x", "red", "worker crashed holding it"),
    "reclaim": ("D", "tab:orange", "reclaimed (lease expired)"),
    "requeue": (">", "tab:cyan", "requeued"),
    "retry": ("<", "tab:blue", "back to pending"),
    "release": ("^", "tab:olive", "released (shutdown)"),
    "lease_lost": ("v", "tab:purple", "lease lost"),
    "stale": ("*", "tab:pink", "stale attempt refused"),
    "reconciled": ("P", "tab:brown", "recovered by the reconciler"),
    "duplicate": (".", "tab:gray", "duplicate ignored"),
    "commit": ("o", "green", "committed"),
    "failed": ("s", "black", "failed"),
    "dead": ("X", "black", "dead-lettered"),
}
ENDS = ("commit", "retry", "release", "failed", "reclaim", "reconciled")


def draw(result: Any, path: str, faults_end_s: float | None = None) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise SystemExit("--plot needs matplotlib: pip install matplotlib") from None
    timeline = sorted(result.timeline)
    tasks = sorted({task for _, task, _, _ in timeline})
    row = {task: i for i, task in enumerate(tasks)}
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(tasks) + 2))
    colours = plt.get_cmap("tab20")
    workers: dict[str, int] = {}
    open_since: dict[int, tuple[float, str]] = {}
    for t, task, kind, who in timeline:
        x = t / 1000
        if kind == "start":
            open_since[task] = (x, who)
        elif kind in ENDS and task in open_since:
            start, owner = open_since.pop(task)
            colour = colours(workers.setdefault(owner.split("#")[0], len(workers)) % 20)
            ax.barh(row[task], x - start, left=start, height=0.5, color=colour, alpha=0.6)
    end = max((t for t, *_ in timeline), default=0) / 1000
    for task, (start, owner) in open_since.items():
        colour = colours(workers.setdefault(owner.split("#")[0], len(workers)) % 20)
        ax.barh(row[task], end - start, left=start, height=0.5, color=colour, alpha=0.6, hatch="//")
    seen = set()
    for t, task, kind, _ in timeline:
        if kind in MARKERS:
            marker, colour, label = MARKERS[kind]
            ax.scatter(
                t / 1000, row[task], marker=marker, color=colour, s=40, zorder=3, label=None if kind in seen else label
            )
            seen.add(kind)
    if faults_end_s is not None:
        ax.axvline(faults_end_s, color="gray", linestyle="--", linewidth=1, label="faults stop")
    ax.set_yticks(range(len(tasks)), [f"task {t}" for t in tasks])
    ax.invert_yaxis()
    ax.set_xlabel("virtual time (s); bars: processing, coloured by worker")
    ax.set_title(f"{result.design} design, scenario {result.scenario}, seed {result.seed}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
