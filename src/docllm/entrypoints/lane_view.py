"""How lanes and tenants look in ``docllm stats`` (the "lanes" object of ``--json``, and two
tables) and on the dashboard (which renders the same object)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from docllm.domain.lanes.figures import GroupFigures, LaneFigures

# JSON key -> table heading (short: the tables fit 80 columns)
COLUMNS = {
    "depth": "depth",
    "in_flight": "run",
    "finished": "done",
    "done_per_min": "done/min",
    "wait_p50_s": "p50",
    "wait_p95_s": "p95",
    "wait_samples": "waits",
    "oldest_pending_s": "oldest",
}


def group_json(g: GroupFigures, key: str, figures: LaneFigures) -> dict[str, Any]:
    oldest = None if g.oldest_pending_s is None else round(g.oldest_pending_s, 1)
    return {
        key: g.name,
        "depth": g.depth,
        "in_flight": g.in_flight,
        "finished": g.finished,
        "done_per_min": figures.per_minute(g),
        "wait_p50_s": g.wait_quantile(0.5),
        "wait_p95_s": g.wait_quantile(0.95),
        "wait_samples": g.wait_samples,
        "oldest_pending_s": oldest,
    }


def lanes_json(figures: LaneFigures) -> dict[str, Any]:
    """``stats --json`` -> "lanes": the window, a row per lane, the top tenants of the window
    (``tenant`` null: rows without a tenant; a tenant whose work all ended in the window is one),
    every other tenant's rows as one (``other_tenants``, tenant "(other)"; null when none), and
    how many named tenants have work in all."""
    others = figures.others
    return {
        "window_s": figures.window_s,
        "by_lane": [group_json(g, "lane", figures) for g in figures.lanes],
        "by_tenant": [group_json(g, "tenant", figures) for g in figures.tenants],
        "other_tenants": None if others is None else group_json(others, "tenant", figures),
        "tenants_with_work": figures.tenants_with_work,
    }


def lane_tables(stats: dict[str, Any]) -> list[Table]:
    lanes = stats.get("lanes")
    if not lanes:
        return []
    hours = f"{lanes['window_s'] / 3600:g} h"
    by_tenant = f"top tenants by depth ({len(lanes['by_tenant'])} shown, {lanes['tenants_with_work']} with work)"
    others = [lanes["other_tenants"]] if lanes.get("other_tenants") else []
    return [
        _table(f"lanes (done, waits p50/p95: last {hours}; seconds, as bucket bounds)", "lane", lanes["by_lane"]),
        _table(by_tenant, "tenant", lanes["by_tenant"] + others),
    ]


def _table(title: str, key: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=title)
    table.add_column(key, no_wrap=True, min_width=len("interactive"))  # the name is what a reader looks for
    for heading in COLUMNS.values():
        table.add_column(heading, justify="right")
    for row in rows:
        name = "(none)" if row[key] is None else escape(row[key])  # tenant names are data, not markup
        table.add_row(name, *(_cell(row[c]) for c in COLUMNS))
    return table


def _cell(value: int | float | None) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
