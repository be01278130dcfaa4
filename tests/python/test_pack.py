"""pipesched.pack: variable-length batches from Python give what `pipesched pack` gives (one
library call behind both), take the lengths as a file or a list, and raise ValueError naming
the bad value."""

import json
import os
import subprocess

import pytest

import pipesched as ps

from test_cli import CLI

HERE = os.path.dirname(os.path.abspath(__file__))
LENGTHS = os.path.join(HERE, "..", "..", "examples", "cli", "testdata", "lengths_long_tail.txt")


def lengths_of(path):
    with open(path) as f:
        return [int(line) for line in f if line.strip() and not line.startswith("#")]


@pytest.mark.skipif(CLI is None, reason="no pipesched CLI built (set PIPESCHED_CLI)")
def test_pack_equals_the_cli():
    out = subprocess.run([CLI, "pack", "--model", "llama3-8b", "--lengths", LENGTHS, "-m", "8",
                          "--stages", "4", "--schedule", "zb-h1", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    ours = ps.pack("llama3-8b", LENGTHS, microbatches=8, stages=4, schedule="zb-h1")
    assert ours == json.loads(out.stdout)


def test_pack_from_a_list():
    lengths = lengths_of(LENGTHS)
    d = ps.pack("llama3-8b", lengths, microbatches=8, stages=4, schedule="1f1b",
                search_evaluations=50)
    assert d["version"] == 1
    assert sorted(i for mb in d["microbatches"] for i in mb["sequences"]) == list(
        range(len(lengths)))
    for mb in d["microbatches"]:
        assert mb["tokens"] == sum(lengths[i] for i in mb["sequences"])
    assert sorted(d["order"]) == list(range(8))
    assert d["step_time"] <= d["baseline_step_time"]
    assert len(d["peak_memory"]) == 4
    assert max(d["peak_memory"]) <= d["memory_limit"]
    assert d["fits"] is True
    text = ps.pack("llama3-8b", lengths, microbatches=8, stages=4, search_evaluations=50,
                   format="text")
    assert "naive baseline" in text and " s" in text and "GiB" in text


def test_pack_memory_limit_forms():
    lengths = lengths_of(LENGTHS)
    a = ps.pack("llama3-8b", lengths, microbatches=8, stages=4, memory_limit="70GiB",
                search_evaluations=10)
    b = ps.pack("llama3-8b", lengths, microbatches=8, stages=4, memory_limit=70 * 2**30,
                search_evaluations=10)
    assert a == b
    assert a["memory_limit"] == 70 * 2**30


def test_pack_errors():
    with pytest.raises(ValueError, match=r"sequence 1 has -5 tokens: every length must be at least 1"):
        ps.pack("llama3-8b", [1024, -5], microbatches=1, stages=4)
    with pytest.raises(ValueError, match=r"sequence 1 has 0 tokens"):
        ps.pack("llama3-8b", [1024, 0], microbatches=1, stages=4)
    with pytest.raises(ValueError, match=r"lengths: must hold at least one sequence"):
        ps.pack("llama3-8b", [], microbatches=1, stages=4)
    with pytest.raises(ValueError, match=r"sequence 1 has 9000 tokens, more than the budget of "
                                         r"8192 tokens per micro-batch"):
        ps.pack("llama3-8b", [1024, 9000], tokens_per_microbatch=8192, stages=4)
    with pytest.raises(ValueError, match=r"expected a file name or a sequence of whole numbers"):
        ps.pack("llama3-8b", [1024, 1.5], microbatches=1, stages=4)
    with pytest.raises(ValueError, match=r"memory_limit: must be a number of bytes > 0"):
        ps.pack("llama3-8b", [1024], microbatches=1, stages=4, memory_limit="lots")
    with pytest.raises(ValueError, match=r"stages: the pipeline stages must be given"):
        ps.pack("llama3-8b", [1024], microbatches=1)


def test_pack_refuses_options_that_do_not_apply():
    # v = 0 is no chunk count (None is the schedule's default); sequence parallelism needs TP > 1.
    with pytest.raises(ValueError, match=r"pack: chunks: must be at least 1 \(leave it unset"):
        ps.pack("llama3-8b", [1024, 2048], microbatches=2, stages=2, chunks=0)
    with pytest.raises(ValueError, match=r"pack: sequence_parallel: needs tp > 1"):
        ps.pack("llama3-8b", [1024, 2048], microbatches=2, stages=2, sequence_parallel=True)
