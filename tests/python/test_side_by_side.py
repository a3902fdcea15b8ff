"""bench/side_by_side.py: shapejit, XLA and torch on the same lines, joined from their two tables."""

import importlib.util
import math
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "side_by_side.py")
_SPEC = importlib.util.spec_from_file_location("side_by_side", _PATH)
side_by_side = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(side_by_side)

SHAPEJIT = [
    "suite | type | shape | perm | src strides | kernel | GB/s | copy GB/s | of copy | target | check | compile ms\n",
    "dl | u8 | 35,7,150 | 2,0,1 | - | runs.a | 1400 | 3700 | 37% | 70% | ok | 12\n",
    "dl | u8 | 100,200 | 1,0 | - | words.b | 2800 | 3600 | 80% | 70% | ok | -\n",
    "dl | f32 | 300,200 | 1,0 | - | transpose.c | 3600 | 4000 | 90% | 75% | ok | -\n",
    # Explicit source strides: not a line the peers time.
    "dl | f32 | 8,9 | 1,0 | 1,8 | transpose.c | 2000 | 4000 | 50% | 75% | ok | -\n",
    # Opaque 16-byte elements, joined with the peers' complex128 line.
    "random-1 | 16B | 40,36 | 1,0 | - | transpose.e | 3000 | 4000 | 75% | 75% | ok | -\n",
    # Only in shapejit's table.
    "dl | f64 | 5,6 | 1,0 | - | transpose.d | 2000 | 4000 | 50% | 75% | ok | -\n",
    "| dl | u8 | 35,7,150 | 2,0,1 | - | runs.a | 37% | 70% |\n",  # the summary's markdown rows repeat lines
]

PEERS = [
    "| shape | perm | elem bytes | torch GB/s | torch % of copy | XLA GB/s | XLA % of copy | copy GB/s | check |\n",
    "|---|---|---|---|---|---|---|---|---|\n",
    "| 35,7,150 | 2,0,1 | 1 | 500 | 14% | 2000 | 55% | 3600 | torch ok, xla ok, copy ok |\n",
    "| 100,200 | 1,0 | 1 | 300 | 8% | 2900 | 82% | 3550 | torch ok, xla ok, copy ok |\n",
    "| 300,200 | 1,0 | 4 | 1000 | 25% | timeout | timeout | 4100 | torch ok, xla timeout, copy ok |\n",
    "| 40,36 | 1,0 | 16 | 3500 | 88% | 2300 | 57% | 3980 | torch ok, xla ok, copy ok |\n",
    # Only in the peers' table.
    "| 9,9 | 1,0 | 2 | 1000 | 25% | 2000 | 50% | 4100 | torch ok, xla ok, copy ok |\n",
    "| 1 | 8 | 336 | 9% | 3% | 1960 | 54% | 39% |\n",  # a summary row: not a line
]


def test_parse_shapejit_keeps_unstrided_lines_by_element_size_shape_and_perm():
    found = side_by_side.parse_shapejit(SHAPEJIT)
    assert set(found) == {(1, "35,7,150", "2,0,1"), (1, "100,200", "1,0"), (4, "300,200", "1,0"), (16, "40,36", "1,0"),
                          (8, "5,6", "1,0")}
    line = found[(1, "35,7,150", "2,0,1")]
    assert line.ratio == pytest.approx(0.37) and line.copy_gbs == 3700 and line.kernel == "runs.a"


def test_parse_peers_reads_each_peer_and_marks_what_did_not_finish():
    found = side_by_side.parse_peers(PEERS)
    assert set(found) == {(1, "35,7,150", "2,0,1"), (1, "100,200", "1,0"), (4, "300,200", "1,0"), (16, "40,36", "1,0"),
                          (2, "9,9", "1,0")}
    assert found[(1, "35,7,150", "2,0,1")].xla == pytest.approx(0.55)
    assert found[(1, "35,7,150", "2,0,1")].torch == pytest.approx(0.14)
    assert found[(4, "300,200", "1,0")].xla is None
    assert found[(4, "300,200", "1,0")].copy_gbs == 4100


def joined():
    ours, peers = side_by_side.parse_shapejit(SHAPEJIT), side_by_side.parse_peers(PEERS)
    return {k: (ours[k], peers[k]) for k in ours if k in peers}


def test_xla_leads_only_beyond_five_percent():
    lines = joined()
    assert side_by_side.xla_leads(*lines[(1, "35,7,150", "2,0,1")])  # 55% against 37%
    assert not side_by_side.xla_leads(*lines[(1, "100,200", "1,0")])  # 82% against 80%: within 5%
    assert not side_by_side.xla_leads(*lines[(4, "300,200", "1,0")])  # XLA did not finish


def test_summary_per_element_size():
    rows = {row[0]: row for row in side_by_side.summary(joined())}
    size, n, ours, ours_min, xla, xla_min, torch, led = rows[1]
    assert n == 2
    assert ours == pytest.approx(math.sqrt(0.37 * 0.80))
    assert ours_min == pytest.approx(0.37)
    assert xla == pytest.approx(math.sqrt(0.55 * 0.82)) and xla_min == pytest.approx(0.55)
    assert torch == pytest.approx(math.sqrt(0.14 * 0.08))
    assert led == [(1, "35,7,150", "2,0,1")]
    # A size whose XLA runs all failed has no XLA figures, and no XLA-led line.
    assert rows[4][4] is None and rows[4][7] == []


def test_render_counts_lines_in_one_input_only(tmp_path, capsys):
    log, md = tmp_path / "sj.log", tmp_path / "peers.md"
    log.write_text("".join(SHAPEJIT))
    md.write_text("".join(PEERS))
    side_by_side.main([str(log), str(md)])
    out = capsys.readouterr().out
    assert "| 1 | 2 | 54% (37%) | 67% (55%) | 11% | 1 |" in out
    assert "| 16 | 1 | 75% (75%) | 57% (57%) | 88% | 0 |" in out
    assert "- XLA leads: 1-byte [35,7,150] 2,0,1: shapejit 37%, XLA 55%" in out
    assert "- copy GB/s: shapejit's process 3600-4000, the peers' 3550-4100" in out
    assert "- lines in one input only: shapejit 1, peers 1" in out


def test_no_common_line_is_an_error(tmp_path):
    log, md = tmp_path / "sj.log", tmp_path / "peers.md"
    log.write_text("".join(SHAPEJIT[:2]))
    md.write_text("".join(PEERS[:2]))
    with pytest.raises(SystemExit):
        side_by_side.main([str(log), str(md)])
