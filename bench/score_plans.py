#!/usr/bin/env python3
"""Scores the rearrange planner against measured planning's timings of every candidate, on the host.

`SHAPEJIT_LOG=info rearrange_bench --random SEED --tune ... > LOG 2>&1` logs, for each line, the time
of every tuning candidate (the planned one first) beside the line's measured bandwidth and its copy's.
This script plans each line again with the `shapejit` CLI given (a build of the planner under test)
and looks up the time of the candidate it plans: that plan's ratio to copy is estimated as the line's
measured ratio times the logged plan's time over its own. No GPU is needed, so a planner rule can be
scored on many lines in seconds; confirm it on fresh seeds on a GPU before trusting it.

Per element type it prints the geometric mean ratio of the logged plans, of the planner under test
and of each line's fastest candidate (what choosing among today's candidates could reach; biased up,
being a minimum over noisy timings, and because the logged plan is timed first). Lines whose new plan
was not timed are counted and left out of all three; lines with explicit source strides are skipped
(their destination strides are not logged). `--by-family` prints that bound per element type and
logged plan's kernel family instead, with no planner to run: where today's kernels fall short even
when chosen well.

  python3 bench/score_plans.py LOG... [--shapejit PATH] [--lines]
  python3 bench/score_plans.py LOG... --by-family
"""

import argparse
import math
import re
import subprocess
import sys
from collections import defaultdict

TUNE_LINE = re.compile(r"shapejit: tune (?P<manifest>.*) --tune: (?P<name>.+) (?P<us>[\d.]+) us$")
ROW_LINE = re.compile(
    r"^(?P<suite>[\w-]+) \| (?P<dtype>\w+) \| (?P<shape>[\d,]+) \| (?P<perm>[\d,]+) \| (?P<strides>\S+) \| "
    r"(?P<kernel>\S+) \| (?P<gbs>\d+) \| (?P<copy>\d+) \| \d+% "
)
KEY_LINE = re.compile(r"key: (\S+)")
LAUNCH_LINE = re.compile(r"launch: (\d+) blocks x \d+ threads for (\d+) tiles")


def parse_log(lines):
    """The lines of a bench log that were tuned: suite, dtype, shape, perm, measured ratio to copy,
    the logged plan's candidate name and every candidate's time (us) but the planned kernel's baked
    twin (`.exact.` in its name; only measured planning launches it, a default plan never does)."""
    cases, times, first = [], {}, None
    for line in lines:
        line = line.rstrip("\n")
        tune = TUNE_LINE.search(line)
        if tune:
            times[tune["name"]] = float(tune["us"])
            first = first or tune["name"]
            continue
        row = ROW_LINE.match(line)
        if not row:
            continue
        if times and row["strides"] == "-":
            plannable = {name: us for name, us in times.items() if ".exact." not in name or ".exact." in first}
            cases.append({"suite": row["suite"], "dtype": row["dtype"], "shape": row["shape"], "perm": row["perm"],
                          "ratio": int(row["gbs"]) / int(row["copy"]), "logged": first, "times": plannable})
        times, first = {}, None
    return cases


def candidate_name(plan_text):
    """The tuning candidate name of the plan that `shapejit plan rearrange` describes (its first,
    fully aligned variant): its kernel key and the tiles each block walks."""
    aligned = plan_text.split("\nvariant 1")[0]
    key = KEY_LINE.search(aligned)
    if not key:
        raise ValueError("no kernel key in the plan:\n" + plan_text)
    launch = LAUNCH_LINE.search(aligned)
    per_block = -(-int(launch[2]) // int(launch[1])) if launch and int(launch[1]) > 0 else 0
    return f"{key[1]} tiles/block {per_block}"


def cli_planner(shapejit):
    def plan(case):
        args = [shapejit, "plan", "rearrange", "--dtype", case["dtype"], "--shape", case["shape"], "--perm",
                case["perm"]]
        done = subprocess.run(args, capture_output=True, text=True, check=True)
        return candidate_name(done.stdout)
    return plan


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def score(cases, plan):
    """Per dtype: the scored lines as (case, planned name, logged ratio, planned ratio, best ratio),
    and the count of lines left out because their plan was not timed."""
    scored, left_out = defaultdict(list), defaultdict(int)
    for case in cases:
        name = plan(case)
        times = case["times"]
        if name not in times:
            left_out[case["dtype"]] += 1
            continue
        logged_us = times[case["logged"]]
        estimate = lambda us: case["ratio"] * logged_us / us
        scored[case["dtype"]].append((case, name, case["ratio"], estimate(times[name]), estimate(min(times.values()))))
    return scored, left_out


def family_bounds(cases):
    """Per (dtype, the logged plan's kernel family): the lines, the geometric mean of their measured
    ratios and of their fastest candidates' estimated ratios, and how many lines' fastest candidate
    (by 3% or more) is of another family."""
    groups = defaultdict(list)
    for case in cases:
        groups[(case["dtype"], case["logged"].split(".")[0])].append(case)
    bounds = {}
    for key, group in groups.items():
        logged, best, elsewhere = [], [], 0
        for case in group:
            times = case["times"]
            fastest = min(times, key=times.get)
            ratio = case["ratio"] * times[case["logged"]] / times[fastest]
            logged.append(case["ratio"])
            best.append(ratio)
            elsewhere += ratio >= 1.03 * case["ratio"] and fastest.split(".")[0] != key[1]
        bounds[key] = (len(group), geomean(logged), geomean(best), elsewhere)
    return bounds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", help="rearrange_bench --tune logs taken with SHAPEJIT_LOG=info")
    parser.add_argument("--shapejit", default="build/src/cli/shapejit", help="the CLI of the planner under test")
    parser.add_argument("--lines", action="store_true", help="also print every line whose plan changed")
    parser.add_argument("--by-family", action="store_true",
                        help="print the fastest candidates' bound per logged kernel family (runs no planner)")
    options = parser.parse_args()
    cases = []
    for path in options.logs:
        with open(path) as log:
            cases += parse_log(log)
    if not cases:
        sys.exit("no tuned lines in the logs (were they taken with --tune and SHAPEJIT_LOG=info?)")
    if options.by_family:
        print("| type | logged family | lines | logged plans | fastest candidate | fastest of another family |")
        print("|---|---|---|---|---|---|")
        for (dtype, family), (lines, logged, best, elsewhere) in sorted(family_bounds(cases).items()):
            print(f"| {dtype} | {family} | {lines} | {100 * logged:.1f}% | {100 * best:.1f}% | {elsewhere} |")
        return
    scored, left_out = score(cases, cli_planner(options.shapejit))
    print("| type | lines scored | left out | logged plans | planner under test | fastest candidate | changed "
          "(up / down by 3+ points) |")
    print("|---|---|---|---|---|---|---|")
    for dtype in sorted(set(scored) | set(left_out)):
        rows = scored[dtype]
        changed = [r for r in rows if r[1] != r[0]["logged"]]
        up = sum(r[3] - r[2] >= 0.03 for r in changed)
        down = sum(r[2] - r[3] >= 0.03 for r in changed)
        print(f"| {dtype} | {len(rows)} | {left_out[dtype]} | {100 * geomean([r[2] for r in rows]):.1f}% | "
              f"{100 * geomean([r[3] for r in rows]):.1f}% | {100 * geomean([r[4] for r in rows]):.1f}% | "
              f"{len(changed)} ({up} / {down}) |")
        if options.lines:
            for case, name, logged, planned, _ in changed:
                print(f"  {case['suite']} {dtype} [{case['shape']}] {case['perm']}: {100 * logged:.0f}% -> "
                      f"{100 * planned:.0f}%  {case['logged']} -> {name}")


if __name__ == "__main__":
    main()
