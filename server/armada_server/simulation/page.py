"""A self-contained HTML page of a simulation's figures: inline SVG and CSS, no script and
nothing fetched, so it opens from a file, an e-mail or a CI artefact. With two runs
(`--compare`), each figure appears for both, side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")
WIDTH, HEIGHT, PAD = 520, 200, 36


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _points(times: Sequence[float], values: Sequence[float], top: float) -> str:
    end = times[-1] or 1.0
    plot_w, plot_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    return " ".join(
        f"{PAD + plot_w * t / end:.1f},{HEIGHT - PAD - plot_h * min(v, top) / top:.1f}"
        for t, v in zip(times, values, strict=True)
    )


def chart(
    title: str,
    times: Sequence[float],
    lines: Sequence[tuple[str, Sequence[float], str, bool]],
    top: float = 1.0,
) -> str:
    """An SVG line chart: each line (label, values, colour, dashed) over `times`."""
    if not times:
        return f"<p>{escape(title)}: no samples</p>"
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{PAD}" y="16" class="title">{escape(title)}</text>',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'class="axis"/>',
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" class="axis"/>',
        f'<text x="{PAD - 4}" y="{PAD + 4}" class="tick" text-anchor="end">{top * 100:.0f}%</text>',
        f'<text x="{PAD - 4}" y="{HEIGHT - PAD}" class="tick" text-anchor="end">0</text>',
        f'<text x="{PAD}" y="{HEIGHT - PAD + 14}" class="tick">0 h</text>',
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - PAD + 14}" class="tick" text-anchor="end">'
        f"{_hours(times[-1])}</text>",
    ]
    legend_x = PAD + 8
    for label, values, colour, dashed in lines:
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.6"{dash} '
            f'points="{_points(times, values, top)}"/>'
        )
        if not dashed:
            parts.append(
                f'<text x="{legend_x}" y="{HEIGHT - 6}" fill="{colour}" class="tick">'
                f"{escape(label)}</text>"
            )
            legend_x += 8 + 7 * len(label)
    parts.append("</svg>")
    return "".join(parts)


def _share_chart(fig: Mapping[str, Any]) -> str:
    lines: list[tuple[str, Sequence[float], str, bool]] = []
    for i, (name, q) in enumerate(fig["queues"].items()):
        colour = COLOURS[i % len(COLOURS)]
        lines.append((name, q["share"], colour, False))
        lines.append((name + " fair share", q["fair_share"], colour, True))
    return chart("Share of the cluster (dashed: fair share)", fig["times"], lines)


def wait_chart(fig: Mapping[str, Any]) -> str:
    """Each queue's waits as bars: p50, p95 and max, on one scale."""
    queues = fig["queues"]
    longest = max((q["wait_seconds"]["max"] or 0.0 for q in queues.values()), default=0.0) or 1.0
    row, label_w = 16, 90
    height = PAD + row * 3 * len(queues) + 8 * len(queues)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="Waits">',
        '<text x="4" y="16" class="title">Waiting time before the first run '
        f"(p50, p95, max; scale {_hours(longest)})</text>",
    ]
    y = PAD
    for i, (name, q) in enumerate(queues.items()):
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<text x="4" y="{y + 12}" class="tick">{escape(name)}</text>')
        for key, opacity in (("p50", 1.0), ("p95", 0.65), ("max", 0.35)):
            value = q["wait_seconds"][key] or 0.0
            width = (WIDTH - label_w - 90) * value / longest
            parts.append(
                f'<rect x="{label_w}" y="{y}" width="{width:.1f}" height="{row - 3}" '
                f'fill="{colour}" fill-opacity="{opacity}"/>'
                f'<text x="{label_w + width + 4:.1f}" y="{y + 11}" class="tick">{key} '
                f"{_hours(value) if value >= 60 else f'{value:.0f} s'}</text>"
            )
            y += row
        y += 8
    parts.append("</svg>")
    return "".join(parts)


def _queue_table(fig: Mapping[str, Any]) -> str:
    def cell(value: float | None) -> str:
        return "-" if value is None else _hours(value) if value >= 60 else f"{value:.0f} s"

    rows = [
        "<table><tr><th>queue</th><th>jobs run</th><th>wait p50</th><th>p95</th>"
        "<th>max</th><th>preemptions</th><th>mean share</th><th>mean fair share</th></tr>"
    ]
    for name, q in fig["queues"].items():
        w = q["wait_seconds"]
        rows.append(
            f"<tr><td>{escape(name)}</td><td>{q['jobs_run']}</td><td>{cell(w['p50'])}</td>"
            f"<td>{cell(w['p95'])}</td><td>{cell(w['max'])}</td><td>{q['preemptions']}</td>"
            f"<td>{q['mean_share']:.1%}</td><td>{q['mean_fair_share']:.1%}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def run_section(label: str, fig: Mapping[str, Any]) -> str:
    """Every figure of one run."""
    util = fig["utilisation"]
    util_lines = [
        (r, u["series"], COLOURS[i % len(COLOURS)], False) for i, (r, u) in enumerate(util.items())
    ]
    means = ", ".join(f"{r} {u['mean']:.1%}" for r, u in util.items())
    error = fig["fairness_error"]
    return (
        f"<section><h2>{escape(label)}</h2>{_share_chart(fig)}"
        f"{chart('Utilisation', fig['times'], util_lines)}"
        f"<p>Mean utilisation: {escape(means)}.</p>"
        f"{chart('Fairness error', fig['times'], [('error', error['series'], '#444', False)])}"
        f"<p>Fairness error: mean {error['mean']:.1%}, max {error['max']:.1%}. "
        f"{fig['decisions']['leased']} leases, {fig['decisions']['preempted']} preemptions "
        f"over {_hours(fig['simulated_seconds'])}.</p>"
        f"{wait_chart(fig)}{_queue_table(fig)}</section>"
    )


STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
.runs{display:grid;grid-template-columns:repeat(auto-fit,minmax(540px,1fr));gap:1.5em}
.chart{width:100%;max-width:560px;display:block;margin:.5em 0}
.axis{stroke:#999} .title{font-size:13px;font-weight:600} .tick{font-size:10px}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #ccc;padding:2px 6px}
td{text-align:right} td:first-child{text-align:left}
"""


def page(title: str, workload: str, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """The whole page: one section per run, side by side."""
    sections = "".join(run_section(label, fig) for label, fig in runs)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1><p>Workload: {escape(workload)}</p>"
        f'<div class="runs">{sections}</div></body></html>\n'
    )
