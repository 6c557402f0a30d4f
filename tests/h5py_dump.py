#!/usr/bin/env python3
"""An external engine's dump, written with h5py alone (docs/DUMP_FORMAT.md), from values attnscope
computed: what a user of another engine would write, to check it with `attnscope check`.

    h5py_dump.py SRC.h5 OUT.h5 [--side NAME] [--tensors x,q,idx,o,out] [--no-attrs]
                 [--move STEP LAYER TENSOR INDEX DELTA]

SRC is an attnscope dump (`attnscope run` with "dump"); its side NAME (default "engine", else "ref")
gives the values. OUT gets the root attributes an outside engine can write (no weights_digest:
it cannot compute attnscope's), the token inputs, every step, every layer with only the listed
tensors under the side "mine", h5py's own defaults (variable-length strings, the default file
format). --no-attrs leaves the layer attributes out (the reader takes SPEC 3's); --move adds DELTA
to element INDEX (flat) of one tensor, as an engine's bug would. Only h5py and numpy are used.
"""
import argparse
import json

import h5py
import numpy as np


def bf16(a):
    """float32 rounded to bf16 values, nearest even (as docs/DUMP_FORMAT.md's example)."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


LAYER_ATTRS = ("ratio", "rows_a_len", "rows_b_len", "cols", "k", "topk", "width", "compress_len", "n_new",
               "indexer_ran")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--side", default=None)
    ap.add_argument("--tensors", default="x,q,idx,o,out")
    ap.add_argument("--no-attrs", action="store_true")
    ap.add_argument("--move", nargs=5, metavar=("STEP", "LAYER", "TENSOR", "INDEX", "DELTA"))
    a = ap.parse_args()
    keep = [t for t in a.tensors.split(",") if t]
    moved = False
    with h5py.File(a.src, "r") as src, h5py.File(a.out, "w") as f:
        assert text(src.attrs["format"]) == "attnscope-dump"
        cfg = json.loads(text(src.attrs["config_json"]))
        f.attrs["format"] = "attnscope-dump"
        f.attrs["format_version"] = 1
        f.attrs["config_json"] = json.dumps(cfg)
        f.attrs["weights_name"] = text(src.attrs["weights_name"])  # which weights ran; no digest
        f.attrs["attnscope_version"] = "h5py_dump.py (an external engine)"
        f.attrs["mode"] = "external"
        f.attrs["created"] = "2025-01-02T03:04:05Z"
        if "precision" in src.attrs:
            f.attrs["precision"] = text(src.attrs["precision"])
        h0 = src["inputs/h0"][...]
        d = f.create_dataset("inputs/h0", data=bf16(h0))
        d.attrs["bf16"] = 1
        d.attrs["first_pos"] = int(src["inputs/h0"].attrs["first_pos"])
        for sname, sstep in src["steps"].items():
            step = f.create_group(f"steps/{int(sname):04d}")
            for k in ("kind", "start_pos", "tokens"):
                v = sstep.attrs[k]
                step.attrs[k] = text(v) if k == "kind" else int(v)
            for lname, slayer in sstep["layers"].items():
                side_name = a.side or ("engine" if "engine" in slayer else "ref")
                sside = slayer[side_name]
                layer = step.create_group(f"layers/{int(lname):02d}")
                if not a.no_attrs:
                    for k in LAYER_ATTRS:
                        layer.attrs[k] = int(sside.attrs[k])
                mine = layer.create_group("mine")
                for t in keep:
                    if t not in sside:
                        continue
                    v = sside[t][...]
                    if a.move and int(a.move[0]) == int(sname) and int(a.move[1]) == int(lname) and a.move[2] == t:
                        v = v.copy()
                        v.reshape(-1)[int(a.move[3])] += np.float32(float(a.move[4]))
                        moved = True
                    if v.dtype.kind == "f":
                        ds = mine.create_dataset(t, data=bf16(v), compression="gzip", shuffle=True)
                        ds.attrs["bf16"] = 1
                    else:
                        mine.create_dataset(t, data=v.astype(np.uint8 if t == "cand" else np.int32))
    if a.move and not moved:
        raise SystemExit(f"h5py_dump.py: --move: no tensor {a.move[2]} at step {a.move[0]}, layer {a.move[1]}")


if __name__ == "__main__":
    main()
