#!/usr/bin/env python3
"""Runs docs/IMPORT.md's "Writing the files" block as written.

    import_doc_example.py IMPORT.md SRC.h5 OUTDIR [--tensors x,q,idx,o,out]
                          [--move STEP LAYER TENSOR INDEX DELTA] [--compressed]

The block writes what the page's forward hooks keep, `dumped` (name -> numpy array) and `meta`:
here they come from an attnscope dump (SRC: `attnscope run` with "dump"; side "engine", else
"ref"), shaped as the hooks keep them: step{S}/h0 per step, each layer's tensors as float32 (bf16
values), indices as int64 (torch's). The hook block is compiled only (it needs torch and a model).
--move adds DELTA to one element of one tensor first (a planted error); --compressed also writes
compressed.npz with np.savez_compressed (deflated members), beside the block's files.
"""
import argparse
import os

import h5py
import numpy as np


def block(md_path, heading):
    """The python block under a heading of the page."""
    lines = open(md_path, encoding="utf-8").read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith(heading))
    opening = next(i for i in range(start, len(lines)) if lines[i].startswith("```python"))
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].startswith("```"))
    return "\n".join(lines[opening + 1:closing]) + "\n"


def hooked_values(src_path, tensors):
    dumped, meta = {}, {}
    with h5py.File(src_path, "r") as src:
        h0 = src["inputs/h0"][...]
        first = int(src["inputs/h0"].attrs.get("first_pos", 0))
        for sname in sorted(src["steps"], key=int):
            st = src["steps"][sname]
            s, pos, n = int(sname), int(st.attrs["start_pos"]), int(st.attrs["tokens"])
            meta[f"step{s}/start_pos"], meta[f"step{s}/tokens"] = pos, n
            dumped[f"step{s}/h0"] = h0[pos - first:pos - first + n].astype(np.float32)
            for lname in sorted(st["layers"], key=int):
                layer = st["layers"][lname]
                side = layer["engine" if "engine" in layer else "ref"]
                for t in tensors:
                    if t in side:
                        a = side[t][...]
                        a = a.astype(np.int64) if a.dtype.kind == "i" else a
                        dumped[f"step{s}/layer{int(lname)}/{t}"] = a
    return dumped, meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("md")
    ap.add_argument("src")
    ap.add_argument("outdir")
    ap.add_argument("--tensors", default="x,q,idx,o,out")
    ap.add_argument("--move", nargs=5, metavar=("STEP", "LAYER", "TENSOR", "INDEX", "DELTA"))
    ap.add_argument("--compressed", action="store_true")
    a = ap.parse_args()
    hooks = block(a.md, "## From a PyTorch forward hook")
    compile(hooks, a.md + ": From a PyTorch forward hook", "exec")
    code = block(a.md, "## Writing the files")
    dumped, meta = hooked_values(a.src, a.tensors.split(","))
    if a.move:
        step, layer, t, index, delta = a.move
        arr = dumped[f"step{step}/layer{layer}/{t}"]
        arr.reshape(-1)[int(index)] += np.float32(delta)
    os.chdir(a.outdir)
    exec(compile(code, a.md + ": Writing the files", "exec"), {"dumped": dumped, "meta": meta})
    if a.compressed:
        np.savez_compressed("compressed.npz", **dumped)
    print(f"ran the example ({len(code.splitlines())} lines): {len(dumped)} tensors, {len(meta)} metadata keys "
          f"in {a.outdir}")


if __name__ == "__main__":
    main()
