#!/usr/bin/env python3
"""A decode step's chain per layer kind, from bench-engine --trace's Chrome trace.

    python3 scripts/trace_chain.py step.json [more.json ...]

For every layer whose projections the trace names (wq_a, wq_b, the sparse attention, wo_a, wo_b), the
time each of those stages ends after the one before it ends (wq_a: after the previous layer's wo_b), so
that the five add up to the layer's share of the step. A programmatically launched kernel starts when
its blocks are resident, so start times say little; ends do. Layers are grouped by how many kernels the
trace gives them (a reuse layer has fewer than an index layer); medians are printed per group.
bench-engine --trace prints the same chain per layer kind (engine/trace_report.c, as_trace_chain) for the
step it ran; this reads traces saved earlier.
"""
import json
import lzma
import statistics
import sys

STAGES = [("wq_a", ["wq_a"]), ("wq_b", ["wq_b + rope", "wq_b"]), ("attn", ["sparse attention + o_back",
          "sparse attention"]), ("wo_a", ["wo_a"]), ("wo_b", ["wo_b"])]


def load(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def chain(trace):
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    by_layer = {}
    for e in kernels:
        by_layer.setdefault(e["args"]["layer"], []).append(e)
    rows, prev_end = [], None
    for layer in sorted(l for l in by_layer if l >= 0):
        evs = by_layer[layer]
        ends = []
        for _, names in STAGES:
            hit = [e["ts"] + e["dur"] for e in evs if e["name"] in names]
            ends.append(max(hit) if hit else None)
        if None in ends:
            prev_end = None
            continue
        if prev_end is not None:
            seg = [ends[0] - prev_end] + [ends[i] - ends[i - 1] for i in range(1, len(ends))]
            rows.append((layer, len(evs), seg))
        prev_end = ends[-1]
    return rows


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in paths:
        try:
            rows = chain(load(path))
        except (OSError, ValueError, KeyError, EOFError, lzma.LZMAError) as err:
            print(f"trace_chain: {path}: {err}", file=sys.stderr)
            return 1
        print(f"{path}: {len(rows)} layers with every stage")
        print("| kernels a layer | layers | " + " | ".join(n for n, _ in STAGES) + " | total (us) |")
        print("| --- " * (len(STAGES) + 3) + "|")
        for k in sorted({r[1] for r in rows}):
            group = [r[2] for r in rows if r[1] == k]
            med = [statistics.median(s[i] for s in group) for i in range(len(STAGES))]
            tot = statistics.median(sum(s) for s in group)
            print(f"| {k} | {len(group)} | " + " | ".join(f"{m:.1f}" for m in med) + f" | {tot:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
