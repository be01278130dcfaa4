"""The module's results equal the `pipesched` CLI's on a small grid (same library, two faces).

The CLI is $PIPESCHED_CLI (set by the ctest), else build*/bin/pipesched in the repository;
the tests are skipped when neither exists.
"""

import glob
import json
import os
import subprocess

import pytest

import pipesched as ps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_cli():
    path = os.environ.get("PIPESCHED_CLI")
    if path:
        return path
    found = sorted(glob.glob(os.path.join(ROOT, "build*", "bin", "pipesched")))
    return found[0] if found else None


CLI = find_cli()
pytestmark = pytest.mark.skipif(CLI is None, reason="no pipesched CLI built (set PIPESCHED_CLI)")

GRID = [(name, p, m) for name in ("gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b",
                                  "zb-v", "v-half", "v-min", "zb-auto")
        for p, m in ((2, 4), (3, 6), (4, 8))]
MODEL = ["--cost", "1,1.5,0.5,0.1", "--memory", "1,0.5"]


def cli(*args):
    out = subprocess.run([CLI, *args], capture_output=True, text=True, check=False)
    assert out.returncode in (0, 1), out.stderr
    return out.stdout


@pytest.mark.parametrize("name,p,m", GRID)
def test_generate_json_and_csv_equal_the_cli(name, p, m):
    shape = ["-s", name, "-p", str(p), "-m", str(m), "--search-evaluations", "20"] \
        if name == "zb-auto" else ["-s", name, "-p", str(p), "-m", str(m)]
    kw = {"search_evaluations": 20} if name == "zb-auto" else {}
    s = ps.generate(name, stages=p, microbatches=m, cost=(1, 1.5, 0.5, 0.1), **kw)
    assert json.loads(cli("generate", *shape, *MODEL, "--format", "json")) == \
        json.loads(ps.to_json(s))
    assert cli("generate", *shape, *MODEL, "--format", "torch-csv") == ps.to_torch_csv(s)


@pytest.mark.parametrize("name,p,m", GRID)
def test_simulate_json_equals_the_cli(name, p, m):
    extra = ["--search-evaluations", "20"] if name == "zb-auto" else []
    kw = {"search_evaluations": 20} if name == "zb-auto" else {}
    g = ps.generate_result(name, p, m, cost=(1, 1.5, 0.5, 0.1), memory=(1, 0.5), **kw)
    ours = ps.simulation_json(g.schedule, cost=(1, 1.5, 0.5, 0.1), memory=(1, 0.5),
                              lower_bound=g.lower_bound)
    theirs = cli("simulate", "-s", name, "-p", str(p), "-m", str(m), *MODEL, *extra, "--json")
    assert json.loads(ours) == json.loads(theirs)
    r = ps.simulate(g.schedule, cost=(1, 1.5, 0.5, 0.1))
    assert json.loads(theirs)["makespan"] == r.makespan


def test_validate_of_a_cli_file(tmp_path):
    path = tmp_path / "s.csv"
    cli("generate", "-s", "zb-h2", "-p", "4", "-m", "8", "--format", "torch-csv",
        "--output", str(path))
    s = ps.read_schedule(str(path))
    assert ps.validate(s).ok and s == ps.generate("zb-h2", 4, 8)
