"""One colour per breakdown category, used by every chart (time, MFU loss, memory, timeline)."""

from __future__ import annotations

TIME_COLORS: dict[str, str] = {
    "forward_compute": "#3b75af",
    "backward_compute": "#7aa6d6",
    "weight_grad": "#2a9d8f",
    "recompute": "#b7cde8",
    "tp_comm": "#ef8a3c",
    "cp_comm": "#e5b53a",
    "ep_comm": "#d45050",
    "pp_comm": "#9a72c0",
    "dp_comm": "#9c6b4e",
    "offload_comm": "#5f8f3e",
    "optimizer": "#4a9e5c",
    "bubble": "#c3c3c3",
    "kernel_efficiency": "#8fb9a8",
    "other": "#8c8c8c",
}
TIME_LABELS: dict[str, str] = {
    "forward_compute": "forward compute", "backward_compute": "backward compute", "weight_grad": "weight grad",
    "recompute": "recompute", "tp_comm": "TP comm (exposed)", "cp_comm": "CP comm (exposed)",
    "ep_comm": "EP comm (exposed)", "pp_comm": "PP p2p (exposed)", "dp_comm": "DP comm (exposed)",
    "offload_comm": "CPU offload (exposed)",
    "optimizer": "optimizer", "bubble": "pipeline bubble", "kernel_efficiency": "kernels below peak",
    "other": "other",
}
MEMORY_COLORS: dict[str, str] = {
    "weights": "#3b75af",
    "grads": "#ef8a3c",
    "optimizer": "#4a9e5c",
    "activations": "#d45050",
    "other": "#9a72c0",
}
# Timeline span kinds → breakdown category (same colours as the time breakdown).
SPAN_CATEGORY: dict[str, str] = {
    "F": "forward_compute", "B": "backward_compute", "W": "weight_grad", "R": "recompute",
    "optimizer": "optimizer", "p2p": "pp_comm", "dp_grad": "dp_comm", "dp_param": "dp_comm",
    "tp": "tp_comm", "cp": "cp_comm", "ep": "ep_comm", "pp": "pp_comm", "dp": "dp_comm",
    "etp": "tp_comm", "edp": "dp_comm",
}


# A communication span off the compute stream (comm, pp, dp streams) runs beside compute: the part
# a compute kernel covers is hidden, the rest exposed (sim/metrics.py); on the compute stream it
# is exposed in full, as TIME_LABELS says. Such spans get this suffix and their own legend entry, in
# a lighter tint of their kind's colour (color_of).
OFF_STREAM = ".overlapped"


def span_category(kind: str, stream: str = "compute") -> str:
    cat = _kind_category(kind)
    if stream != "compute" and cat.endswith("_comm"):
        return cat + OFF_STREAM
    return cat


def span_label(category: str) -> str:
    """Legend text of a Gantt category: TIME_LABELS, or the off-compute-stream wording."""
    base = category.removesuffix(OFF_STREAM)
    if base != category:
        # short: three legend columns of "… (side stream: hidden while compute runs)" ran past the
        # chart at 1,280 px; the caption under the chart says what a side stream hides
        return TIME_LABELS.get(base, base).replace(" (exposed)", "") + " (side stream)"
    return TIME_LABELS.get(category, category)


def _kind_category(kind: str) -> str:
    if kind in SPAN_CATEGORY:
        return SPAN_CATEGORY[kind]
    if kind in TIME_COLORS:
        return kind
    for prefix in ("tp", "cp", "ep", "pp", "dp"):
        if kind.startswith(prefix):
            return f"{prefix}_comm"
    return "other"


# How far a side-stream category's colour is mixed towards white: the kind's hue, visibly lighter
# (in one colour, "TP comm (exposed)" and "TP comm (side stream…)" read as the same legend entry)
SIDE_TINT = 0.42


def tint(color: str, share: float = SIDE_TINT) -> str:
    """``#rrggbb`` mixed with white: ``share`` 0 keeps it, 1 is white."""
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * share):02x}" for c in rgb)


def color_of(category: str, colors: dict[str, str] | None = None) -> str:
    """A category's colour; a side-stream (hidden) communication category gets its kind's colour
    tinted lighter."""
    colors = colors or TIME_COLORS
    base = category.removesuffix(OFF_STREAM)
    color = colors.get(base, TIME_COLORS["other"])
    return tint(color) if base != category else color


def scale(categories: list[str], colors: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(domain, range) for an Altair colour scale over ``categories`` in a stable order (an
    off-compute-stream category follows its base, in a lighter tint of the base's colour)."""
    colors = colors or TIME_COLORS
    order = []
    for c in colors:
        order += [x for x in (c, c + OFF_STREAM) if x in categories]
    order += sorted(c for c in set(categories) if c not in order)
    return order, [color_of(c, colors) for c in order]
