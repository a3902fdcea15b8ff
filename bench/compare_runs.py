#!/usr/bin/env python3
"""Compares two builds of rearrange_bench on the same lines, as ratios to the copy of their own run.

Each build's logs (`rearrange_bench --cases-dir DIR ... > LOG`) are rounds of the same lines, best run
alternating with the other build's in one device call. A line's ratio is the mean of its rounds. Prints,
per element size and for all lines, the geometric means before and after and the lines that moved by
`--points` points of copy or more each way, then the copy bandwidth range of both builds. Lines that a
build did not check bit-exact ("check" not ok) are named and left out, as are lines missing from one
build. With `--lines`, every line too, from the largest fall to the largest gain.

  python3 bench/compare_runs.py --base B1.log,B2.log --change C1.log,C2.log [--points 3] [--lines]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from side_by_side import DTYPE_BYTES, fmt, geomean  # noqa: E402


def parse_rounds(texts):
    """rearrange_bench logs -> ({(element bytes, shape, perm, src strides): (mean ratio, kernel)}, copy GB/s
    seen, lines not checked ok). The ratio is GB/s over the same line's copy GB/s."""
    ratios, kernels, copies, unchecked = {}, {}, [], set()
    for text in texts:
        for line in text.splitlines():
            cells = [c.strip() for c in line.split("|")]
            if len(cells) < 11 or cells[1] not in DTYPE_BYTES or not cells[6].isdigit() or not cells[7].isdigit():
                continue
            key = (DTYPE_BYTES[cells[1]], cells[2], cells[3], cells[4])
            if cells[10] != "ok":
                unchecked.add(key)
            ratios.setdefault(key, []).append(float(cells[6]) / float(cells[7]))
            kernels.setdefault(key, cells[5])
            copies.append(float(cells[7]))
    lines = {key: (sum(r) / len(r), kernels[key]) for key, r in ratios.items()}
    return lines, copies, unchecked


def compare(base, change, points):
    """Rows (label, lines, base geomean, change geomean, up, down) per element size and for all lines."""
    keys = sorted(set(base) & set(change))
    by_size = [(f"{size}-byte", [k for k in keys if k[0] == size]) for size in sorted({k[0] for k in keys})]
    moved = points / 100
    rows = []
    for label, group in by_size + [("all", keys)]:
        up = sum(change[k][0] - base[k][0] >= moved for k in group)
        down = sum(base[k][0] - change[k][0] >= moved for k in group)
        rows.append((label, len(group), geomean([base[k][0] for k in group]), geomean([change[k][0] for k in group]),
                     up, down))
    return rows


def render(base, change, base_copies, change_copies, points, lines):
    out = [f"| elements | lines | base | change | up / down by {points} points or more |", "|---|---|---|---|---|"]
    for label, n, before, after, up, down in compare(base, change, points):
        out.append(f"| {label} | {n} | {100 * before:.1f}% | {100 * after:.1f}% | {up} / {down} |")
    out.append(f"- copy GB/s: base {min(base_copies):.0f}-{max(base_copies):.0f}, "
               f"change {min(change_copies):.0f}-{max(change_copies):.0f}")
    out.append(f"- lines in one build only: base {len(set(base) - set(change))}, "
               f"change {len(set(change) - set(base))}")
    if lines:
        keys = sorted(set(base) & set(change), key=lambda k: change[k][0] / base[k][0])
        out += ["", "| elements | shape | perm | base | change | base kernel | change kernel |",
                "|---|---|---|---|---|---|---|"]
        for k in keys:
            out.append(f"| {k[0]} | {k[1]} | {k[2]} | {fmt(base[k][0])} | {fmt(change[k][0])} | {base[k][1]} | "
                       f"{change[k][1]} |")
    return "\n".join(out)


def read_logs(paths):
    texts = []
    for path in paths.split(","):
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    return texts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the base build's logs, comma-separated rounds")
    parser.add_argument("--change", required=True, help="the changed build's logs, comma-separated rounds")
    parser.add_argument("--points", type=float, default=3, help="points of copy a line must move to count")
    parser.add_argument("--lines", action="store_true", help="also print every line")
    args = parser.parse_args(argv)
    base, base_copies, base_unchecked = parse_rounds(read_logs(args.base))
    change, change_copies, change_unchecked = parse_rounds(read_logs(args.change))
    unchecked = base_unchecked | change_unchecked
    for key in sorted(unchecked):
        print(f"- not checked ok, left out: {key[0]}-byte [{key[1]}] {key[2]}", file=sys.stderr)
    for key in unchecked:
        base.pop(key, None)
        change.pop(key, None)
    if not set(base) & set(change):
        sys.exit("compare_runs: no line checked ok in both builds")
    print(render(base, change, base_copies, change_copies, args.points, args.lines))


if __name__ == "__main__":
    main()
