#!/usr/bin/env python3
"""Puts shapejit, XLA and torch side by side on the same rearrange lines, as ratios to copy.

Reads a rearrange_bench log (`rearrange_bench --cases-dir DIR ... > LOG`, shapejit's bandwidth and its
process's copy) and a peers_random.py table (`peers_random.md`, XLA's and torch's, each against its
own process's copy), joins them by element size, shape and permutation, and prints one markdown row
per joined line, then per element size the geometric means and lowest ratios of the three and the
lines where XLA is more than 5% faster than shapejit. The two are compared by their ratios to the copy
of their own process, so the comparison holds across processes only as far as those copies agree
(both ranges are printed). Lines found in one input only are counted and left out.

  python3 bench/side_by_side.py SHAPEJIT_LOG PEERS_MD
"""

import argparse
import math
import sys
from dataclasses import dataclass

DTYPE_BYTES = {"u8": 1, "i8": 1, "u16": 2, "i16": 2, "f16": 2, "bf16": 2, "u32": 4, "i32": 4, "f32": 4,
               "u64": 8, "i64": 8, "f64": 8}
XLA_LEAD = 1.05  # XLA counts as faster where its ratio to copy exceeds shapejit's by this factor


@dataclass
class Shapejit:
    ratio: float  # bandwidth over the same process's copy
    copy_gbs: float
    kernel: str


@dataclass
class Peers:
    torch: float | None  # ratios to copy; None where the peer did not finish
    xla: float | None
    copy_gbs: float


def percent(text):
    text = text.strip()
    return float(text[:-1]) / 100 if text.endswith("%") else None


def element_bytes(type_name):
    """A line's element size from its type: a dtype, or `16B` for opaque elements of 16 bytes."""
    if type_name in DTYPE_BYTES:
        return DTYPE_BYTES[type_name]
    if type_name.endswith("B") and type_name[:-1].isdigit():
        return int(type_name[:-1])
    return None


def parse_shapejit(lines):
    """rearrange_bench's line table (`suite | type | shape | perm | src strides | kernel | GB/s | copy GB/s |
    of copy | ...`) -> {(element bytes, shape, perm): Shapejit}; lines with explicit strides are skipped."""
    found = {}
    for line in lines:
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 9 or element_bytes(cells[1]) is None or cells[4] != "-":
            continue
        ratio = percent(cells[8])
        if ratio is None or not cells[7].isdigit():
            continue
        found[(element_bytes(cells[1]), cells[2], cells[3])] = Shapejit(ratio, float(cells[7]), cells[5])
    return found


def parse_peers(lines):
    """peers_random.py's table (`| shape | perm | elem bytes | torch GB/s | torch % of copy | XLA GB/s |
    XLA % of copy | copy GB/s | check |`) -> {(element bytes, shape, perm): Peers}."""
    found = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 8 or not cells[2].isdigit() or not cells[7].isdigit():
            continue
        found[(int(cells[2]), cells[0], cells[1])] = Peers(percent(cells[4]), percent(cells[6]), float(cells[7]))
    return found


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def xla_leads(ours, peers):
    return peers.xla is not None and peers.xla > XLA_LEAD * ours.ratio


def fmt(ratio):
    return "-" if ratio is None else f"{100 * ratio:.0f}%"


def summary(joined):
    """Per element size: lines, geomeans and lowest of shapejit, XLA and torch, and the XLA-led lines."""
    rows = []
    for size in sorted({key[0] for key in joined}):
        group = {k: v for k, v in joined.items() if k[0] == size}
        ours = [s.ratio for s, _ in group.values()]
        xla = [p.xla for _, p in group.values() if p.xla is not None]
        torch = [p.torch for _, p in group.values() if p.torch is not None]
        led = [k for k, (s, p) in group.items() if xla_leads(s, p)]
        rows.append((size, len(group), geomean(ours), min(ours), geomean(xla), min(xla) if xla else None,
                     geomean(torch), led))
    return rows


def render(joined, only_shapejit, only_peers):
    out = ["| elements | shape | perm | shapejit | XLA | torch | shapejit kernel |", "|---|---|---|---|---|---|---|"]
    for (size, shape, perm), (s, p) in sorted(joined.items()):
        out.append(f"| {size} | {shape} | {perm} | {fmt(s.ratio)} | {fmt(p.xla)} | {fmt(p.torch)} | {s.kernel} |")
    out += ["", "| elements | lines | shapejit | XLA | torch | lines where XLA is >5% faster |", "|---|---|---|---|---|---|"]
    for size, n, ours, ours_min, xla, xla_min, torch, led in summary(joined):
        out.append(f"| {size} | {n} | {fmt(ours)} ({fmt(ours_min)}) | {fmt(xla)} ({fmt(xla_min)}) | {fmt(torch)} | {len(led)} |")
    led = [k for size_row in summary(joined) for k in size_row[7]]
    for size, shape, perm in led:
        s, p = joined[(size, shape, perm)]
        out.append(f"- XLA leads: {size}-byte [{shape}] {perm}: shapejit {fmt(s.ratio)}, XLA {fmt(p.xla)}")
    if joined:
        ours_copy = [s.copy_gbs for s, _ in joined.values()]
        peer_copy = [p.copy_gbs for _, p in joined.values()]
        out.append(f"- copy GB/s: shapejit's process {min(ours_copy):.0f}-{max(ours_copy):.0f}, "
                   f"the peers' {min(peer_copy):.0f}-{max(peer_copy):.0f}")
    out.append(f"- lines in one input only: shapejit {only_shapejit}, peers {only_peers}")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shapejit_log", help="rearrange_bench output")
    parser.add_argument("peers_md", help="peers_random.py's peers_random.md (or its printed output)")
    args = parser.parse_args(argv)
    with open(args.shapejit_log) as f:
        ours = parse_shapejit(f)
    with open(args.peers_md) as f:
        peers = parse_peers(f)
    joined = {k: (ours[k], peers[k]) for k in ours if k in peers}
    if not joined:
        sys.exit("no line is in both inputs")
    print(render(joined, len(ours) - len(joined), len(peers) - len(joined)))


if __name__ == "__main__":
    main()
