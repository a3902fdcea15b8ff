"""bench/compare_runs.py: two builds of rearrange_bench on the same lines, rounds averaged."""

import importlib.util
import math
import os
import sys

import pytest

_BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
sys.path.insert(0, _BENCH)
_SPEC = importlib.util.spec_from_file_location("compare_runs", os.path.join(_BENCH, "compare_runs.py"))
compare_runs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(compare_runs)

HEADER = "suite | type | shape | perm | src strides | kernel | GB/s | copy GB/s | of copy | target | check | compile ms\n"


def log(*rows):
    """A rearrange_bench log of lines (type, shape, GB/s, copy GB/s, check), perm 1,0, kernel k.<type>."""
    return HEADER + "".join(f"dl | {t} | {shape} | 1,0 | - | k.{t} | {gbs} | {copy} | x% | 70% | {check} | 1\n"
                            for t, shape, gbs, copy, check in rows)


BASE = [
    log(("u8", "9,99", 2000, 4000, "ok"), ("u8", "7,77", 3000, 4000, "ok"), ("f64", "5,55", 3600, 4000, "ok"),
        ("f16", "3,33", 1000, 4000, "ok"), ("f16", "2,22", 1000, 4000, "ok")),
    log(("u8", "9,99", 2200, 4000, "ok"), ("u8", "7,77", 3000, 4000, "ok"), ("f64", "5,55", 3600, 4000, "ok"),
        ("f16", "3,33", 1000, 4000, "ok"), ("f16", "2,22", 1000, 4000, "ok")),
]
CHANGE = [
    log(("u8", "9,99", 3000, 4000, "ok"), ("u8", "7,77", 2800, 4000, "ok"), ("f64", "5,55", 3620, 3900, "ok"),
        ("f16", "3,33", 2000, 4000, "FAIL"), ("f32", "4,44", 1000, 4000, "ok")),
    log(("u8", "9,99", 3000, 4000, "ok"), ("u8", "7,77", 2800, 4000, "ok"), ("f64", "5,55", 3620, 3900, "ok"),
        ("f16", "3,33", 2000, 4000, "ok"), ("f32", "4,44", 1000, 4000, "ok")),
]


def test_parse_rounds_averages_each_line_and_names_lines_not_checked_ok():
    lines, copies, unchecked = compare_runs.parse_rounds(BASE)
    assert lines[(1, "9,99", "1,0", "-")][0] == pytest.approx(0.525)  # 50% and 55%
    assert lines[(1, "9,99", "1,0", "-")][1] == "k.u8"
    assert min(copies) == 4000 and len(copies) == 10
    assert unchecked == set()
    _, _, unchecked = compare_runs.parse_rounds(CHANGE)
    assert unchecked == {(2, "3,33", "1,0", "-")}


def test_compare_per_element_size_and_all():
    base, _, _ = compare_runs.parse_rounds(BASE)
    change, _, _ = compare_runs.parse_rounds(CHANGE)
    rows = {row[0]: row for row in compare_runs.compare(base, change, 3)}
    label, n, before, after, up, down = rows["1-byte"]
    assert n == 2
    assert before == pytest.approx(math.sqrt(0.525 * 0.75)) and after == pytest.approx(math.sqrt(0.75 * 0.70))
    assert (up, down) == (1, 1)  # 52.5% -> 75% up; 75% -> 70% down
    # f64 90% -> 92.8% (against its own run's copy): 2.8 points moves it at a bound of 2, not of 3.
    assert rows["8-byte"][4:] == (0, 0)
    assert {row[0]: row for row in compare_runs.compare(base, change, 2)}["8-byte"][4:] == (1, 0)
    assert rows["all"][1] == 4  # f16 [2,22] and f32 [4,44], each in one build only, are left out


def test_main_leaves_out_unchecked_lines_and_counts_lines_of_one_build(tmp_path, capsys):
    paths = []
    for name, text in [("b1", BASE[0]), ("b2", BASE[1]), ("c1", CHANGE[0]), ("c2", CHANGE[1])]:
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    compare_runs.main(["--base", ",".join(paths[:2]), "--change", ",".join(paths[2:]), "--lines"])
    out, err = capsys.readouterr()
    assert "not checked ok, left out: 2-byte [3,33] 1,0" in err
    assert "| 1-byte | 2 | 62.7% | 72.5% | 1 / 1 |" in out
    assert "- copy GB/s: base 4000-4000, change 3900-4000" in out
    assert "- lines in one build only: base 1, change 1" in out
    assert out.index("| 1 | 7,77 |") < out.index("| 1 | 9,99 |")  # largest fall first


def test_no_line_in_both_builds_is_an_error(tmp_path):
    (tmp_path / "b").write_text(log(("u8", "9,99", 2000, 4000, "ok")))
    (tmp_path / "c").write_text(log(("u8", "8,88", 2000, 4000, "ok")))
    with pytest.raises(SystemExit):
        compare_runs.main(["--base", str(tmp_path / "b"), "--change", str(tmp_path / "c")])
