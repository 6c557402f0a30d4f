#!/usr/bin/env python3
"""The per-kernel table of one decode step from `gpu_session.sh ncudecode`'s ncu_decode.csv(.xz).

    python3 scripts/ncu_decode_table.py bench/logs/ncu_decode_....csv.xz [KERNELS]

KERNELS (default 555) is how many launches the last graph replay has (bench-engine prints the
graph's kernel count): the table sums the last KERNELS launches of the file, grouped by kernel.
Each launch was timed alone by Nsight Compute, so the sum is above the graph's time (no overlap).
"""
import collections
import csv
import io
import lzma
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 555
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        lines = [l for l in f.read().splitlines() if l.startswith('"')]
    launches = collections.OrderedDict()
    for r in csv.DictReader(io.StringIO("\n".join(lines))):
        d = launches.setdefault(r["ID"], {"name": r["Kernel Name"]})
        d[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    last = list(launches.values())[-n:]
    groups = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for x in last:
        g = groups[x["name"].split("(")[0][:60]]
        g[0] += 1
        g[1] += x["gpu__time_duration.sum"] / 1e3
        g[2] += x.get("dram__bytes_read.sum", 0.0) / 1e6
    total = sum(g[1] for g in groups.values())
    print(f"| kernel | launches | us each | us in all | DRAM MB read | TB/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (k, us, mb) in sorted(groups.items(), key=lambda t: -t[1][1]):
        print(f"| `{name}` | {k} | {us / k:.2f} | {us:.1f} | {mb:.1f} | {mb / us if us else 0:.2f} |")
    print(f"| **all {len(last)} launches** | | | **{total:.1f}** | | |")


if __name__ == "__main__":
    main()
