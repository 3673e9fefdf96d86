"""Draw a program graph with plain matplotlib: boxes in topological layers, arrows between.

Layout is in inches (one data unit = one inch), so boxes are sized from the
measured text and the figure grows with the graph instead of squashing it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from promptgym.utils._plot_data import graph_layers, schema_lines

_PALETTE = ["#fef3c7", "#dcfce7", "#fce7f3", "#ede9fe", "#ffedd5", "#e0f2fe", "#f1f5f9"]
_INPUT_COLOR = "#dbeafe"
_LINE = 0.22          # inches per text line
_PAD_X, _PAD_Y = 0.18, 0.12
_GAP_X, _GAP_Y = 0.45, 0.55
_MARGIN = 0.3
_WAYPOINT = 0.1     # width of the slot a layer-skipping edge passes through


def node_lines(node: Mapping[str, Any], show_schemas: bool = False, show_module_names: bool = True,
               show_defs: bool = False, show_trainable: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """The text lines of a node's box, each with its matplotlib text style."""
    label = str(node.get("label") or node["id"])
    class_name = str(node.get("class_name") or "")
    if not show_module_names and class_name and class_name != "Input":
        label = class_name  # an input box keeps its data model's name: "Input" alone says nothing
    lines: list[tuple[str, dict[str, Any]]] = [(label, {"fontsize": 10.5, "fontweight": "bold"})]
    if class_name and class_name != label:
        lines.append((class_name, {"fontsize": 9, "style": "italic", "color": "#475569"}))
    if show_trainable and class_name != "Input":
        trainable = "trainable" if node.get("trainable") else "not trainable"
        lines.append((trainable, {"fontsize": 8.5, "color": "#15803d" if node.get("trainable") else "#64748b"}))
    schema = node.get("schema")
    if show_schemas:
        for text in schema_lines(schema):
            lines.append((text, {"fontsize": 8.5, "family": "monospace", "color": "#1e293b"}))
        if show_defs and isinstance(schema, Mapping) and schema.get("$defs"):
            lines.append(("$defs: " + ", ".join(sorted(schema["$defs"])),
                          {"fontsize": 8.5, "family": "monospace", "color": "#475569"}))
    return lines


def route(graph: Mapping[str, Any]) -> tuple[list[list[str]], dict[tuple[str, str], list[str]]]:
    """Layers with waypoints, and each edge's hops.

    An edge that skips layers gets a waypoint (id ``"~src~dst~k"``) in every
    layer it crosses, so it is drawn through the gaps between boxes, never
    behind one. Layers after the first are ordered by the mean position of
    their parents (fewer crossings); ties keep the listed order, waypoints last.
    Returns ``(layers, {(src, dst): [src, waypoint..., dst]})``.
    """
    layers = [list(layer) for layer in graph_layers(graph)]
    layer_of = {n: i for i, layer in enumerate(layers) for n in layer}
    hops: dict[tuple[str, str], list[str]] = {}
    for src, dst in (tuple(str(e) for e in edge) for edge in graph.get("edges") or []):
        if (src, dst) in hops:
            continue
        chain = [src]
        for k, layer_index in enumerate(range(layer_of[src] + 1, layer_of[dst])):
            waypoint = f"~{src}~{dst}~{k}"
            layers[layer_index].append(waypoint)
            chain.append(waypoint)
        hops[(src, dst)] = chain + [dst]
    waypoints = {w for chain in hops.values() for w in chain[1:-1]}
    parents: dict[str, list[str]] = {}
    for chain in hops.values():
        for a, b in zip(chain, chain[1:]):
            parents.setdefault(b, []).append(a)
    for index in range(1, len(layers)):
        position = {n: i for i, n in enumerate(layers[index - 1])}
        listed = {n: i for i, n in enumerate(layers[index])}

        def key(node: str) -> tuple[float, bool, int]:
            mine = [position[p] for p in parents.get(node, []) if p in position]
            return (sum(mine) / len(mine) if mine else len(position), node in waypoints, listed[node])

        layers[index].sort(key=key)
    return layers, hops


def draw_program(graph: Mapping[str, Any], new_figure: Callable[..., Any], *, show_schemas: bool = False,
                 show_module_names: bool = True, show_defs: bool = False, show_trainable: bool = False,
                 title: str | None = None) -> Any:
    """A Figure showing ``graph`` (``{"nodes": [...], "edges": [[src, dst], ...]}``)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path as MplPath

    layers, hops = route(graph)
    nodes = {str(node["id"]): node for node in graph["nodes"]}
    lines = {node_id: node_lines(node, show_schemas, show_module_names, show_defs, show_trainable)
             for node_id, node in nodes.items()}

    # measure text (in inches) with the Agg renderer of a scratch figure
    scratch = new_figure(1, 1)
    renderer = scratch.canvas.get_renderer()

    def text_width(text: str, style: dict[str, Any]) -> float:
        font = FontProperties(size=style.get("fontsize", 10), weight=style.get("fontweight", "normal"),
                              style=style.get("style", "normal"), family=style.get("family", "sans-serif"))
        width, _, _ = renderer.get_text_width_height_descent(text, font, ismath=False)
        return width / scratch.dpi

    size = {node_id: (max(1.3, max(text_width(t, s) for t, s in node_lines) + 2 * _PAD_X),
                      len(node_lines) * _LINE + 2 * _PAD_Y)
            for node_id, node_lines in lines.items()}
    size.update({n: (_WAYPOINT, 0.0) for layer in layers for n in layer if n not in nodes})
    layer_widths = [sum(size[n][0] for n in layer) + _GAP_X * (len(layer) - 1) for layer in layers]
    layer_heights = [max(size[n][1] for n in layer) for layer in layers]
    title_space = 0.5 if title else 0.0
    width = max(layer_widths) + 2 * _MARGIN
    height = sum(layer_heights) + _GAP_Y * (len(layers) - 1) + 2 * _MARGIN + title_space

    figure = new_figure(width, height, layout=None)
    ax = figure.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    if title:
        ax.text(width / 2, height - _MARGIN - 0.15, str(title), ha="center", va="center", fontsize=13,
                fontweight="bold")

    classes: list[str] = []
    box: dict[str, tuple[float, float, float, float]] = {}  # x_center, y_top, w, h
    y_top = height - _MARGIN - title_space
    for layer, layer_width, layer_height in zip(layers, layer_widths, layer_heights):
        x = (width - layer_width) / 2
        for node_id in layer:
            w, h = size[node_id]
            if node_id not in nodes:  # waypoint: a vertical pass through the whole layer
                box[node_id] = (x + w / 2, y_top, w, layer_height)
                x += w + _GAP_X
                continue
            top = y_top - (layer_height - h) / 2
            box[node_id] = (x + w / 2, top, w, h)
            class_name = str(nodes[node_id].get("class_name") or "")
            if class_name != "Input" and class_name not in classes:
                classes.append(class_name)
            color = _INPUT_COLOR if class_name == "Input" else _PALETTE[classes.index(class_name) % len(_PALETTE)]
            ax.add_patch(FancyBboxPatch((x, top - h), w, h, boxstyle="round,pad=0,rounding_size=0.08",
                                        facecolor=color, edgecolor="#334155", linewidth=1.2, zorder=2))
            for row, (text, style) in enumerate(lines[node_id]):
                ax.text(x + w / 2, top - _PAD_Y - (row + 0.5) * _LINE, text, ha="center", va="center",
                        zorder=3, **style)
            x += w + _GAP_X
        y_top -= layer_height + _GAP_Y

    # arrows: several arrows leaving / entering one box are spread along its edge
    outgoing: dict[str, list[str]] = {}
    incoming: dict[str, list[str]] = {}
    for chain in hops.values():
        outgoing.setdefault(chain[0], []).append(chain[1])
        incoming.setdefault(chain[-1], []).append(chain[-2])

    def attach(node_id: str, others: list[str], other: str) -> float:
        x, _, w, _ = box[node_id]
        ordered = sorted(others, key=lambda o: box[o][0])
        if len(ordered) == 1:
            return x
        return x - 0.3 * w + 0.6 * w * ordered.index(other) / (len(ordered) - 1)

    for chain in hops.values():
        src, dst = chain[0], chain[-1]
        points = [(attach(src, outgoing[src], chain[1]), box[src][1] - box[src][3])]
        for waypoint in chain[1:-1]:
            x, top, _, h = box[waypoint]
            points += [(x, top), (x, top - h)]
        points.append((attach(dst, incoming[dst], chain[-2]), box[dst][1]))
        path = MplPath(points, [MplPath.MOVETO] + [MplPath.LINETO] * (len(points) - 1))
        ax.add_patch(FancyArrowPatch(path=path, arrowstyle="-|>", mutation_scale=14, linewidth=1.3,
                                     color="#334155", shrinkA=0, shrinkB=1, zorder=1))
    return figure
