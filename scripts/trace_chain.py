#!/usr/bin/env python3
"""A decode step's chain per layer kind, from bench-engine --trace's Chrome trace.

    python3 scripts/trace_chain.py step.json [more.json ...]

For every layer whose projections the trace names (wq_a, wq_b, the sparse attention, wo_a, wo_b), the
time each of those stages ends after the one before it ends (wq_a: after the previous layer's wo_b), so
that the five add up to the layer's share of the step; then the attention's inputs: the last end of the
layer's other events (neither wq_b's nor the attention's) before the attention's first kernel ends, less
wq_b's end (> 0: the kv branch or the selection came last), and the attention's end after its last input.
Inputs are found by their ends, not their streams: a graph runs its branches on streams of its own choosing. A programmatically launched kernel starts when
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


def inputs(events, q_end, attn_end):
    """The attention's inputs besides q (as_trace_chain's branch_us, attn_us): the last end of an event,
    neither wq_b's nor the attention's, that ends before the attention's first kernel, less wq_b's end; the
    attention's end after its last input. None, None when no such event."""
    attn = [e for e in events if e.get("cat") == "kernel" and e["name"] in STAGES[2][1]]
    first_end = min(e["ts"] + e["dur"] for e in attn)
    skip = STAGES[1][1] + STAGES[2][1]
    branch = [e["ts"] + e["dur"] for e in events if e["name"] not in skip and e["ts"] + e["dur"] < first_end]
    if not branch:
        return None, None
    return max(branch) - q_end, attn_end - max(max(branch), q_end)


def chain(trace):
    every = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    kernels = [e for e in every if e.get("cat") == "kernel"]
    by_layer, all_by_layer = {}, {}
    for e in kernels:
        by_layer.setdefault(e["args"]["layer"], []).append(e)
    for e in every:
        all_by_layer.setdefault(e["args"].get("layer", -1), []).append(e)
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
            rows.append((layer, len(evs), seg, inputs(all_by_layer[layer], ends[1], ends[2])))
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
        print("| kernels a layer | layers | " + " | ".join(n for n, _ in STAGES) +
              " | total (us) | branch - wq_b | attn after its inputs |")
        print("| --- " * (len(STAGES) + 5) + "|")
        for k in sorted({r[1] for r in rows}):
            group = [r[2] for r in rows if r[1] == k]
            med = [statistics.median(s[i] for s in group) for i in range(len(STAGES))]
            tot = statistics.median(sum(s) for s in group)
            ins = [r[3] for r in rows if r[1] == k and r[3][0] is not None]
            extra = " | ".join(f"{statistics.median(x[i] for x in ins):.1f}" if ins else "-" for i in range(2))
            print(f"| {k} | {len(group)} | " + " | ".join(f"{m:.1f}" for m in med) + f" | {tot:.1f} | {extra} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
