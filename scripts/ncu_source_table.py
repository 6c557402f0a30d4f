#!/usr/bin/env python3
"""Nsight Compute's source page (gpu_session.sh topkprof: `ncu -i REP --page source --csv --print-source
cuda,sass`, optionally .xz) summed per CUDA source line: warp-state samples (all, and not issued) and
instructions executed, the heaviest lines first, as a Markdown table; then the samples by stall reason
over the whole kernel (all samples; stall_no_inst: instruction fetch, the instruction cache missing).

    python3 scripts/ncu_source_table.py bench/logs/topk_source_*.csv.xz [N]
"""
import csv
import io
import lzma
import sys


def read(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", newline="") as f:
        return list(csv.reader(io.StringIO(f.read())))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    rows = read(sys.argv[1])
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    hdr, path, lines, stalls = None, "?", {}, {}
    for r in rows:
        if len(r) >= 2 and r[0] == "File Path":
            path = r[1].rsplit("/", 1)[-1]
        elif r and r[0] == "Line No":
            hdr = r
        elif hdr and len(r) == len(hdr) and r[0]:  # a CUDA line (its SASS rows have no line number)
            col = dict(zip(hdr[4:], r[4:]))

            def num(name):
                v = col.get(name, "0").replace(",", "")
                return int(v) if v.strip().lstrip("-").isdigit() else 0

            key = (path, int(r[0]))
            s = lines.setdefault(key, [0, 0, 0, r[1].strip()])
            s[0] += num("Warp Stall Sampling (All Samples)")
            s[1] += num("Warp Stall Sampling (Not-issued Samples)")
            s[2] += num("Instructions Executed")
            for name in hdr[4:]:
                if name.startswith("stall_") and "(" not in name:  # not the "(Not Issued)" twins
                    stalls[name] = stalls.get(name, 0) + num(name)
    if not lines:
        sys.exit(f"{sys.argv[1]}: no source lines (not an ncu source page?)")
    tot = [sum(v[i] for v in lines.values()) for i in range(3)]
    print(f"{tot[0]} samples ({tot[1]} not issued), {tot[2]} warp instructions executed\n")
    print("| file:line | samples | % | not issued | instructions | source |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (f, ln), (a, ni, ins, src) in sorted(lines.items(), key=lambda kv: (-kv[1][0], -kv[1][2]))[:top]:
        pct = 100.0 * a / tot[0] if tot[0] else 0.0
        print(f"| {f}:{ln} | {a} | {pct:.1f} | {ni} | {ins} | `{src[:70].replace('|', '/')}` |")
    total = sum(stalls.values())
    if total:
        print("\n| stall reason | samples | % |\n| --- | --- | --- |")
        for name, v in sorted(stalls.items(), key=lambda kv: -kv[1])[:12]:
            print(f"| {name} | {v} | {100.0 * v / total:.1f} |")


if __name__ == "__main__":
    main()
