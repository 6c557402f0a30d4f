#!/usr/bin/env python3
"""Runs docs/DUMP_FORMAT.md's "Writing one with h5py" example as written.

    h5py_doc_example.py DUMP_FORMAT.md SRC.h5 OUTDIR

The example takes what an engine computed (config_text, h0, steps) from the variables it names;
here they come from an attnscope dump (SRC: `attnscope run` with "dump"), every layer's x, q, idx,
o and out of its side "engine" (else "ref"). The code block is extracted from the page and
executed unchanged, in OUTDIR (it writes mine.h5 there).
"""
import os
import sys

import h5py
import numpy as np


def example(md_path):
    """The python block under the heading "## Writing one with h5py"."""
    lines = open(md_path, encoding="utf-8").read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("## Writing one with h5py"))
    opening = next(i for i in range(start, len(lines)) if lines[i].startswith("```python"))
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].startswith("```"))
    return "\n".join(lines[opening + 1:closing]) + "\n"


def engine_values(src_path):
    def text(v):
        return v.decode() if isinstance(v, bytes) else str(v)

    with h5py.File(src_path, "r") as src:
        config_text = text(src.attrs["config_json"])
        h0 = src["inputs/h0"][...]
        steps = []
        for sname in sorted(src["steps"], key=int):
            sstep = src["steps"][sname]
            layers = {}
            for lname in sorted(sstep["layers"], key=int):
                slayer = sstep["layers"][lname]
                side = slayer["engine" if "engine" in slayer else "ref"]
                layers[int(lname)] = {t: side[t][...] for t in ("x", "q", "idx", "o", "out") if t in side}
            steps.append({"kind": text(sstep.attrs["kind"]), "start_pos": int(sstep.attrs["start_pos"]),
                          "tokens": int(sstep.attrs["tokens"]), "layers": layers})
    return config_text, h0, steps


def main():
    md, src, outdir = sys.argv[1:4]
    code = example(md)
    config_text, h0, steps = engine_values(src)
    os.chdir(outdir)
    scope = {"config_text": config_text, "h0": h0, "steps": steps, "np": np}
    exec(compile(code, md + ": Writing one with h5py", "exec"), scope)
    print(f"ran the example ({len(code.splitlines())} lines): {os.path.join(outdir, 'mine.h5')}")


if __name__ == "__main__":
    main()
