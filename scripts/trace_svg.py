#!/usr/bin/env python3
"""Draws one step of a pipeline run's timeline (`gptc train --mesh pp=P
--trace FILE`: FILE.rank<r>.json per stage) as an SVG: a row per stage,
forwards blue, backwards orange, waits for a message gray, in the
colors of --emit=schedule's planned picture.

    scripts/trace_svg.py OUT.svg TRACE.rank0.json TRACE.rank1.json ... [--step N] [--title T]
"""
import argparse
import json


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("traces", nargs="+")
    p.add_argument("--step", type=int, default=0, help="1-based; default the last")
    p.add_argument("--title", default="")
    a = p.parse_args()
    ranks = []
    for path in a.traces:
        events = json.load(open(path))["traceEvents"]
        slices = [e for e in events if e["ph"] == "X"]
        ranks.append((slices[0]["pid"] if slices else len(ranks), slices))
    ranks.sort()
    steps = sorted({int(e["name"].split()[1]) for _, s in ranks for e in s if e["cat"] == "step"})
    step = a.step or steps[-1]
    windows = [e for _, s in ranks for e in s if e["cat"] == "step" and e["name"] == "step %d" % step]
    begin = min(e["ts"] for e in windows)
    end = max(e["ts"] + e["dur"] for e in windows)
    width, left, row, top = 960.0, 70.0, 28.0, 34.0
    scale = (width - left - 10) / (end - begin)
    height = top + len(ranks) * row + 30
    colors = {"forward": "#4e79a7", "backward": "#f28e2b", "wait": "#d9d9d9"}
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">%s (step %d, %.1f ms)</text>' % (left, a.title, step, (end - begin) / 1000)]
    for r, (rank, slices) in enumerate(ranks):
        y = top + r * row
        out.append('<text x="8" y="%.1f">stage %d</text>' % (y + row * 0.65, rank))
        for e in slices:
            if e["tid"] != 2 or e["cat"] not in colors or e["ts"] < begin or e["ts"] > end:
                continue
            x, w = left + (e["ts"] - begin) * scale, max(e["dur"] * scale, 0.5)
            out.append('<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s" stroke="white" stroke-width="0.5"><title>%s %.2f ms</title></rect>'
                       % (x, y + 2, w, row - 4, colors[e["cat"]], e["name"], e["dur"] / 1000))
            label = e["name"][1:] if e["cat"] != "wait" else ""
            if label and w > 7 * len(label):
                out.append('<text x="%.2f" y="%.1f" text-anchor="middle" fill="white">%s</text>' % (x + w / 2, y + row * 0.6, label))
    y = top + len(ranks) * row + 18
    for i, (name, color) in enumerate([("forward", colors["forward"]), ("backward", colors["backward"]), ("waiting for a message", colors["wait"])]):
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>' % (left + 110 * i, y - 10, color, left + 110 * i + 16, y, name))
    out.append("</svg>")
    open(a.out, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
