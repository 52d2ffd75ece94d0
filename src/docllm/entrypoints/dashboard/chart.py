"""The throughput chart: an inline SVG drawn on the server (no JavaScript, no chart library)."""

from __future__ import annotations

from markupsafe import Markup

WIDTH, HEIGHT, PAD = 720, 140, 24


def throughput_svg(per_minute: dict[str, list[int]]) -> Markup:
    """Stacked bars per minute, oldest left: succeeded (green) under failed (red)."""
    ok, failed = per_minute.get("success", []), per_minute.get("failed", [])
    n = max(len(ok), 1)
    totals = [a + b for a, b in zip(ok, failed, strict=True)]
    top = max([*totals, 1])
    step = (WIDTH - 2 * PAD) / n
    bars = []
    for i, (s, f) in enumerate(zip(ok, failed, strict=True)):
        x, w = PAD + i * step, step * 0.8
        hs, hf = s / top * (HEIGHT - 2 * PAD), f / top * (HEIGHT - 2 * PAD)
        y = HEIGHT - PAD - hs
        title = f"<title>{n - 1 - i} min ago: {s} succeeded, {f} failed</title>"
        bars.append(
            f'<rect class="ok" x="{x:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}" height="{hs:.1f}">{title}</rect>'
        )
        if f:
            bars.append(f'<rect class="bad" x="{x:.1f}" y="{y - hf:.1f}" width="{w:.1f}" height="{hf:.1f}"/>')
    axis = (
        f'<line class="axis" x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}"/>'
        f'<text x="{PAD}" y="{HEIGHT - 6}">-{n} min</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 6}" text-anchor="end">now</text>'
        f'<text x="{PAD}" y="{PAD - 8}">{top}/min</text>'
    )
    label = f"tasks finished per minute, last {n} minutes: {sum(ok)} succeeded, {sum(failed)} failed"
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{label}">{axis}{"".join(bars)}</svg>'
    )
