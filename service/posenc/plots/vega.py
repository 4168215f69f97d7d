"""A `model.Figure` as a Vega-Lite spec for the explorer page, with the numbers inline: every panel
zooms and pans (drag, wheel; double-click resets), shows the values under the pointer, and the page
exports it as PNG/SVG (vega-embed) and its data as CSV/JSON.

Why Vega-Lite (vendored in posenc/explore/vendor, see docs/explorer.md): a declarative spec is
plain JSON the service can build and the tests can read; zoom, tooltips and PNG/SVG export come
with it; it runs under the page's strict CSP (no eval) with Vega's expression interpreter; and its
~0.8 MB is a fifth of Plotly's bundle."""

from __future__ import annotations

from .model import Figure, Panel

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"  # an identifier only: nothing is fetched
RULE_COLORS = ("#d62728", "#ff7f0e", "#7f7f7f", "#9467bd")
#: Most heatmap cells one panel draws.
HEAT_CELLS = 1 << 14


def _scale(log: bool) -> dict:
    return {"type": "log"} if log else {"type": "linear", "zero": False}


def _axis(title: str) -> dict:
    return {"title": title, "labelFontSize": 11, "titleFontSize": 12}


def _series_layer(panel: Panel) -> dict:
    rows = []
    for s in panel.series:
        for x, y in zip(s.x, s.y):
            if x is None or y is None:
                continue
            if panel.y_floor is not None:
                y = max(y, panel.y_floor)
            rows.append({"series": s.name, "x": x, "y": y})
    points = {s.name for s in panel.series if s.mark == "point"}
    emphasis = [s.name for s in panel.series if s.emphasis]
    return {
        "data": {"values": rows},
        # Lines carry transparent points: the pointer finds a value anywhere along them (hover values).
        "mark": {"type": "line", "clip": True, "point": {"fill": "transparent", "stroke": None, "size": 60}}
        if not points or len(points) < len(panel.series) else {"type": "point", "filled": True, "size": 28,
                                                                  "clip": True},
        "params": [{"name": "zoom", "select": "interval", "bind": "scales"}],
        "encoding": {
            "x": {"field": "x", "type": "quantitative", "scale": _scale(panel.x_log), "axis": _axis(panel.x_label)},
            "y": {"field": "y", "type": "quantitative", "scale": _scale(panel.y_log), "axis": _axis(panel.y_label)},
            "color": {"field": "series", "type": "nominal", "sort": [s.name for s in panel.series],
                      # more series than Vega's 10 default colours (the lab's 10 schemes and a floor): 20, none reused
                      **({"scale": {"scheme": "category20"}} if len(panel.series) > 10 else {}),
                      "legend": {"title": None, "orient": "bottom", "columns": 2, "labelFontSize": 12,
                                 "labelLimit": 360}},
            "strokeWidth": {"condition": {"test": {"field": "series", "oneOf": emphasis}, "value": 3}, "value": 1.5}
            if emphasis else {"value": 1.5},
            "tooltip": [{"field": "series", "type": "nominal"},
                        {"field": "x", "type": "quantitative", "title": panel.x_label, "format": ".6~g"},
                        {"field": "y", "type": "quantitative", "title": panel.y_label, "format": ".4~e"}],
        },
    }


def _rule_layers(panel: Panel) -> list:
    layers = []
    for i, rule in enumerate(panel.rules):
        channel = "x" if rule.axis == "x" else "y"
        layers.append({
            "data": {"values": [{"label": rule.label, "value": rule.value}]},
            "mark": {"type": "rule", "color": RULE_COLORS[i % len(RULE_COLORS)], "strokeWidth": 1.5,
                     "strokeDash": [6, 4] if rule.dashed else [1, 0]},
            "encoding": {channel: {"field": "value", "type": "quantitative"},
                         "tooltip": [{"field": "label", "type": "nominal"},
                                     {"field": "value", "type": "quantitative", "format": ".6~g"}]},
        })
    for band in panel.bands:
        a, b = ("x", "x2") if band.axis == "x" else ("y", "y2")
        layers.append({
            "data": {"values": [{"label": band.label, "low": band.low, "high": band.high}]},
            "mark": {"type": "rect", "color": "#2ca02c", "opacity": 0.15},
            "encoding": {a: {"field": "low", "type": "quantitative"}, b: {"field": "high"},
                         "tooltip": [{"field": "label", "type": "nominal"}]},
        })
    return layers


def _heat_step(panel: Panel) -> int:
    """Every k-th row drawn, so a panel has at most HEAT_CELLS rectangles (the browser draws each one)."""
    z = panel.heat.z
    return max(1, -(-len(z) * len(z[0]) // HEAT_CELLS)) if z and z[0] else 1


def _heat_layer(panel: Panel) -> dict:
    heat, step = panel.heat, _heat_step(panel)
    rows = [{"x": c, "y": r, "value": v} for r in range(0, len(heat.z), step) for c, v in enumerate(heat.z[r])]
    return {
        "data": {"values": rows},
        "mark": {"type": "rect"},
        "params": [{"name": "zoom", "select": "interval", "bind": "scales"}],
        "encoding": {
            "x": {"field": "x", "type": "quantitative", "bin": {"binned": True, "step": 1},
                  "scale": {"zero": True}, "axis": _axis(panel.x_label)},
            "x2": {"field": "x_end"},
            "y": {"field": "y", "type": "quantitative", "bin": {"binned": True, "step": step},
                  "scale": {"reverse": True, "zero": True}, "axis": _axis(panel.y_label)},
            "y2": {"field": "y_end"},
            "color": {"field": "value", "type": "quantitative",
                      "scale": {"scheme": "redblue", "reverse": True, "domain": [heat.low, heat.high]},
                      "legend": {"title": None}},
            "tooltip": [{"field": "y", "title": panel.y_label}, {"field": "x", "title": panel.x_label},
                        {"field": "value", "format": ".6f"}],
        },
        "transform": [{"calculate": "datum.x + 1", "as": "x_end"}, {"calculate": f"datum.y + {step}", "as": "y_end"}],
    }


def panel_spec(panel: Panel) -> dict:
    layers = []
    if panel.heat is not None:
        layers.append(_heat_layer(panel))
    if panel.series:
        layers.append(_series_layer(panel))
    layers += _rule_layers(panel)
    title = panel.title
    if panel.heat is not None and _heat_step(panel) > 1:
        title += f" (one position in {_heat_step(panel)} drawn; the export has all)"
    return {"title": {"text": title, "fontSize": 13, "limit": 720}, "width": 520, "height": 300,
            "layer": layers, "resolve": {"scale": {"color": "independent"}}}


def to_spec(figure: Figure) -> dict:
    """The Vega-Lite spec: the panels side by side, each with its own scales and legend."""
    return {"$schema": SCHEMA, "hconcat": [panel_spec(p) for p in figure.panels],
            "resolve": {"scale": {"color": "independent", "x": "independent", "y": "independent"},
                        "legend": {"color": "independent"}},
            "config": {"legend": {"labelFontSize": 12}, "view": {"stroke": "#ccc"}}}
