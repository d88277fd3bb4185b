"""The timeline picture: the candidate's run drawn under the baseline's, as SVG.

Drawn on the server from the result's trace, one lane per worker / stage / validator,
both on the same time axis so the speedup is visible as a shorter picture.
"""

from html import escape

WIDTH = 880
LABEL_WIDTH = 120
LANE_HEIGHT = 18
LANE_GAP = 4
SECTION_GAP = 30
PALETTE = ["#3559c7", "#2e7d32", "#b26a00", "#8e24aa", "#00838f", "#c62828", "#5d4037",
           "#546e7a"]


def _color(op: str, ops: list[str]) -> str:
    return PALETTE[ops.index(op) % len(PALETTE)] if op in ops else PALETTE[-1]


def _section(
    title: str, trace: dict, top: float, scale: float, ops: list[str]
) -> tuple[list[str], float]:
    parts = [f'<text x="0" y="{top + 12}" class="tl-title">{escape(title)} · '
             f'{trace.get("makespan", 0):g} s</text>']
    top += 20
    lanes = list(trace.get("lanes") or [])
    for span in trace.get("spans") or []:
        if span.get("lane") not in lanes:
            lanes.append(span.get("lane"))
    rows = {lane: top + i * (LANE_HEIGHT + LANE_GAP) for i, lane in enumerate(lanes)}
    for lane, y in rows.items():
        parts.append(f'<text x="0" y="{y + 13}" class="tl-lane">{escape(str(lane))}</text>')
        parts.append(f'<line x1="{LABEL_WIDTH}" y1="{y + LANE_HEIGHT}" x2="{WIDTH}" '
                     f'y2="{y + LANE_HEIGHT}" class="tl-grid"/>')
    for span in trace.get("spans") or []:
        start, end = float(span.get("start", 0)), float(span.get("end", 0))
        x = LABEL_WIDTH + start * scale
        w = max(1.0, (end - start) * scale)
        y = rows[span.get("lane")]
        op = str(span.get("op", ""))
        label = f"{span.get('lane')}: {op}"
        if span.get("batch") is not None:
            label += f" (batch {span['batch']})"
        label += f" · {start:g} to {end:g} s"
        if span.get("blocking"):
            label += " · blocking"
        css = "tl-span tl-blocking" if span.get("blocking") else "tl-span"
        parts.append(
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{LANE_HEIGHT}" rx="2" '
            f'fill="{_color(op, ops)}" class="{css}"><title>{escape(label)}</title></rect>'
        )
    bottom = top + len(lanes) * (LANE_HEIGHT + LANE_GAP)
    return parts, bottom


def timeline_svg(trace: dict | None) -> str:
    """SVG markup (all text escaped), or "" when there is nothing to draw."""
    if not trace or not trace.get("baseline"):
        return ""
    sections = [("Baseline (synchronous)", trace["baseline"])]
    if trace.get("candidate"):
        sections.append(("Your run", trace["candidate"]))
    longest = max(float(t.get("makespan") or 0) for _, t in sections) or 1.0
    scale = (WIDTH - LABEL_WIDTH - 10) / longest
    ops = sorted({str(s.get("op", "")) for _, t in sections for s in t.get("spans") or []})
    parts, top = [], 0.0
    for title, data in sections:
        drawn, top = _section(title, data, top, scale, ops)
        parts += drawn
        top += SECTION_GAP
    legend_y = top
    x = LABEL_WIDTH
    for op in ops:
        color = _color(op, ops)
        parts.append(f'<rect x="{x}" y="{legend_y}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{x + 14}" y="{legend_y + 9}" class="tl-legend">{escape(op)}</text>')
        x += 24 + 7 * len(op)
    height = legend_y + 20
    if any(span.get("blocking") for _, t in sections for span in t.get("spans") or []):
        y = legend_y + 16  # a row of its own: the outline, not a colour
        parts.append(f'<rect x="{LABEL_WIDTH + 1}" y="{y + 1}" width="9" height="9" '
                     f'class="tl-blocking tl-legend-blocking"/>')
        parts.append(f'<text x="{LABEL_WIDTH + 14}" y="{y + 9}" class="tl-legend">'
                     "red outline: a blocking call (nothing else on its loop could run)</text>")
        height += 16
    return (
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {height:.0f}" width="100%" role="img" '
        f'aria-label="Timeline of the baseline and the candidate run" '
        f'xmlns="http://www.w3.org/2000/svg">' + "".join(parts) + "</svg>"
    )
