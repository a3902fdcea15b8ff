"""bench/score_plans.py: reading measured planning's logs and scoring a planner against them."""

import importlib.util
import math
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "score_plans.py")
_SPEC = importlib.util.spec_from_file_location("score_plans", _PATH)
score_plans = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(score_plans)

TUNE = "shapejit info: shapejit: tune rearrange --dtype f32 --shape 300,200 --src-strides 1,300 --dst-strides 200,1 --tune: "
LOG = [
    TUNE + "transpose.a tiles/block 2 10.00 us\n",
    TUNE + "transpose.b tiles/block 1 8.00 us\n",
    TUNE + "skewed.c tiles/block 1 5.00 us\n",
    # The planned kernel's baked twin: measured planning's alone, never a default plan's.
    TUNE + "transpose.a.exact.n4.ea300.eb200_300:1:200_200:300:1 tiles/block 2 4.00 us\n",
    "suite | type | shape | perm | src strides | kernel | GB/s | copy GB/s | of copy | target | check | compile ms\n",
    "  tuned: skewed.c tiles/block 1 100% of copy (12 ms to plan), ok\n",
    "random-7 | f32 | 200,300 | 1,0 | - | transpose.a | 2000 | 4000 | 50% | 75% | ok | -\n",
    # One candidate only: nothing was timed, so nothing to score.
    "random-7 | u8 | 64,64 | 0,1 | - | row.x | 3000 | 4000 | 75% | 75% | ok | -\n",
    # Explicit source strides: skipped (the destination's are not in the table).
    TUNE + "transpose.a tiles/block 2 10.00 us\n",
    "dl | f16 | 8,9 | 1,0 | 1,8 | transpose.a | 2000 | 4000 | 50% | 70% | ok | -\n",
]

PLAN = """rearrange: shape [300, 200], 4 bytes per element
variant 0 (base pointers aligned to 4/8/16 bytes):
  family transpose: tile 64 x 64
  launch: 470 blocks x 256 threads for 940 tiles
  key: transpose.u4.t256.d2
variant 1 (base pointers aligned to 2 bytes):
  launch: 10 blocks x 256 threads for 10 tiles
  key: segments.u2
"""


def test_parse_log_keeps_tuned_lines_with_their_timings():
    cases = score_plans.parse_log(LOG)
    assert len(cases) == 1
    case = cases[0]
    assert (case["suite"], case["dtype"], case["shape"], case["perm"]) == ("random-7", "f32", "200,300", "1,0")
    assert case["ratio"] == pytest.approx(0.5)
    assert case["logged"] == "transpose.a tiles/block 2"
    assert case["times"] == {"transpose.a tiles/block 2": 10.0, "transpose.b tiles/block 1": 8.0,
                             "skewed.c tiles/block 1": 5.0}


def test_candidate_name_is_the_aligned_variants_key_and_tiles_per_block():
    assert score_plans.candidate_name(PLAN) == "transpose.u4.t256.d2 tiles/block 2"
    with pytest.raises(ValueError):
        score_plans.candidate_name("rearrange: a plan without a kernel\n")


def test_score_scales_the_measured_ratio_by_the_planned_candidates_time():
    cases = score_plans.parse_log(LOG)
    scored, left_out = score_plans.score(cases, lambda case: "transpose.b tiles/block 1")
    (case, name, logged, planned, best), = scored["f32"]
    assert name == "transpose.b tiles/block 1"
    assert logged == pytest.approx(0.5)
    assert planned == pytest.approx(0.5 * 10 / 8)
    assert best == pytest.approx(0.5 * 10 / 5)
    assert not left_out


def test_a_plan_that_was_not_timed_is_left_out():
    scored, left_out = score_plans.score(score_plans.parse_log(LOG), lambda case: "words.d tiles/block 1")
    assert not scored["f32"]
    assert left_out == {"f32": 1}
    assert math.isnan(score_plans.geomean([]))
    assert score_plans.geomean([0.5, 2.0]) == pytest.approx(1.0)


def test_family_bounds_give_each_logged_family_its_fastest_candidates_bound():
    bounds = score_plans.family_bounds(score_plans.parse_log(LOG))
    lines, logged, best, elsewhere = bounds[("f32", "transpose")]
    assert lines == 1
    assert logged == pytest.approx(0.5)
    assert best == pytest.approx(0.5 * 10 / 5)
    assert elsewhere == 1  # the fastest candidate is a skewed tile
    assert set(bounds) == {("f32", "transpose")}
