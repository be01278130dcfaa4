"""JSON and PyTorch CSV reading and writing, and PyTorch action strings."""

import json

import pytest

import pipesched as ps


def test_json_round_trip():
    for name in ("1f1b", "zb-h2", "interleaved-1f1b", "zb-v"):
        s = ps.generate(name, stages=4, microbatches=8)
        text = ps.to_json(s)
        assert json.loads(text)["version"] == 1
        back = ps.from_json(text)
        assert back == s and back.name == name


@pytest.mark.parametrize("layout", [None, "steps", "list"])
@pytest.mark.parametrize("spelling", [None, "current", "legacy"])
def test_torch_csv_round_trip(layout, spelling):
    for name in ("1f1b", "zb-h1", "zb-h2", "interleaved-1f1b", "zb-v"):
        s = ps.generate(name, stages=4, microbatches=8)
        csv = ps.to_torch_csv(s, csv_layout=layout, csv_spelling=spelling)
        assert ps.from_torch_csv(csv, name) == s


def test_torch_csv_golden_and_actions():
    s = ps.generate("1f1b", stages=2, microbatches=2)
    assert ps.to_torch_csv(s) == "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1\n"
    assert ps.to_torch_actions(s) == [["0F0", "0F1", None, "0B0", None, "0B1"],
                                      [None, "1F0", "1B0", "1F1", "1B1"]]
    assert ps.to_torch_actions(s, csv_layout="list", csv_spelling="legacy") == [
        ["0F0", "0F1", "0BW0", "0BW1"], ["1F0", "1BW0", "1F1", "1BW1"]]
    h1 = ps.generate("zb-h1", stages=4, microbatches=8)
    ranks = ps.to_torch_actions(h1, csv_layout="list")
    assert ranks[0][:6] == ["0F0", "0F1", "0F2", "0F3", "0I0", "0W0"]
    assert ranks[3][:2] == ["3F0", "3I0"]
    # V placement: stage 0 holds PyTorch stages 0 and 7.
    v = ps.generate("zb-v", stages=4, microbatches=8)
    assert any(a.startswith("7") for a in ps.to_torch_actions(v, csv_layout="list")[0])
    # The actions are the CSV's cells.
    for layout in ("steps", "list"):
        rows = ps.to_torch_actions(h1, csv_layout=layout)
        assert "".join(",".join(c or "" for c in r) + "\n" for r in rows) == \
            ps.to_torch_csv(h1, csv_layout=layout)


def test_overlapped_pair_spelling():
    # A pair marked on the IR: F2 of stage 0 overlaps the BW0 after it (PyTorch's OVERLAP_F_B).
    s = ps.Schedule(2, 3, name="pair", ops=[
        [ps.Op("F", 0), ps.Op("F", 1), ps.Op("F", 2, overlap_next=True), ps.Op("BW", 0),
         ps.Op("BW", 1), ps.Op("BW", 2)],
        [ps.Op("F", 0), ps.Op("F", 1, overlap_next=True), ps.Op("BW", 0), ps.Op("F", 2),
         ps.Op("BW", 1), ps.Op("BW", 2)]])
    assert ps.validate(s).ok
    ranks = ps.to_torch_actions(s, csv_layout="list")
    assert ranks == [["0F0", "0F1", "(0F2;0B0)OVERLAP_F_B", "0B1", "0B2"],
                     ["1F0", "(1F1;1B0)OVERLAP_F_B", "1F2", "1B1", "1B2"]]
    back = ps.from_torch_csv(ps.to_torch_csv(s), "pair")
    assert back == s and back.stage_ops(0)[2].overlap_next


def test_read_schedule_by_content(tmp_path):
    s = ps.generate("zb-h1", stages=3, microbatches=5)
    (tmp_path / "a.json").write_text(ps.to_json(s))
    (tmp_path / "b.csv").write_text(ps.to_torch_csv(s))
    (tmp_path / "c.txt").write_text(ps.to_torch_csv(s))
    assert ps.read_schedule(str(tmp_path / "a.json")) == s
    csv = ps.read_schedule(str(tmp_path / "b.csv"))
    assert csv == s and csv.name == "b"
    assert ps.read_schedule(str(tmp_path / "c.txt"), input_format="torch-csv") == s


def test_simulation_json_matches_the_simulator():
    s = ps.generate("zb-h1", stages=4, microbatches=8)
    j = json.loads(ps.simulation_json(s, cost=(1, 2, 1)))
    r = ps.simulate(s, cost=(1, 2, 1))
    assert j["makespan"] == r.makespan and j["bubble_rate"] == r.bubble_rate
    assert (j["p"], j["m"], j["v"], j["name"]) == (4, 8, 1, "zb-h1")
