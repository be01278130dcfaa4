#!/usr/bin/env python3
"""Records a torch.profiler trace of a small GPT's training steps on CPU, for `pipesched
calibrate --trace TRACE --shapes SHAPES` (docs/formats.md, "Profiler traces").

Usage: /usr/bin/python3 scripts/record_trace.py [OUT_PREFIX] [--full]
  OUT_PREFIX  default tests/data/gpt_cpu; writes OUT_PREFIX.trace.json and OUT_PREFIX.shapes.json
  --full      keep every event (default: trimmed, below)

Debian's python3-torch 1.13 is built without Kineto: its export_chrome_trace writes the legacy
format (a JSON array of complete events: name, ts and dur in microseconds, tid, no shapes),
while prof.events() carries each op's input_shapes. So this script writes the shapes beside the
trace: one entry per op event kept, matched to the trace by (name, tid, ts).

The model: token embedding, 3 pre-norm blocks (LayerNorm, QKV projection, causal attention as
matmuls with a masked softmax, output projection, LayerNorm, GELU MLP), a final LayerNorm and an
untied LM head with cross-entropy; hidden 256, 4 heads, FFN 1024, vocabulary 2048, 4 sequences
of 128 tokens, float32, one thread. Two steps of forward, backward and AdamW; the first warms
the allocator and the kernels' caches, the second is the one kept.

Trimmed: the second step's events, without the views and metadata ops (as_strided, view,
reshape, t, transpose, expand, ... : no work of their own; their few microseconds are then in
their parent's time, which is in the same category). The shapes file lists the ops whose shapes
calibrate uses: GEMMs (mm, addmm, bmm, baddbmm, matmul, linear) and elementwise ops.
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

HIDDEN, HEADS, FFN, VOCAB, LAYERS = 256, 4, 1024, 2048, 3
BATCH, SEQ = 4, 128

# Ops with no work of their own (views, metadata): dropped from the trimmed trace.
VIEW_OPS = {
    "aten::as_strided", "aten::view", "aten::reshape", "aten::_reshape_alias", "aten::t",
    "aten::transpose", "aten::expand", "aten::permute", "aten::unsqueeze", "aten::squeeze",
    "aten::select", "aten::slice", "aten::split", "aten::chunk", "aten::narrow", "aten::detach",
    "aten::detach_", "detach", "detach_", "aten::alias", "aten::resolve_conj", "aten::resolve_neg",
    "aten::is_nonzero", "aten::item", "aten::_local_scalar_dense", "aten::empty",
    "aten::empty_strided", "aten::empty_like", "aten::contiguous", "aten::_unsafe_view",
    "aten::result_type", "aten::to", "aten::_to_copy", "aten::lift_fresh", "aten::numel",
    "aten::size", "aten::stride", "aten::dim",
}
# Ops whose shapes calibrate reads (GEMMs; elementwise ops for the memory-bound rate).
SHAPE_OPS = {
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
    "aten::add", "aten::add_", "aten::mul", "aten::mul_", "aten::div", "aten::div_", "aten::sub",
    "aten::sub_", "aten::gelu", "aten::gelu_backward", "aten::copy_", "aten::fill_",
    "aten::zero_", "aten::masked_fill", "aten::masked_fill_", "aten::addcmul_",
    "aten::addcdiv_", "aten::sqrt", "aten::lerp_", "aten::_softmax",
    "aten::_softmax_backward_data", "aten::native_layer_norm",
    "aten::native_layer_norm_backward",
}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, FFN)
        self.fc2 = nn.Linear(FFN, HIDDEN)
        mask = torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, s, h = x.shape
        d = h // HEADS
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, HEADS, d).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        scores = scores.masked_fill(self.mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    full = "--full" in sys.argv[1:]
    prefix = args[0] if args else os.path.join("tests", "data", "gpt_cpu")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ))
    targets = torch.randint(0, VOCAB, (BATCH, SEQ))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for step in range(2):
            with record_function(f"step#{step}"):
                opt.zero_grad(set_to_none=True)
                loss = model(tokens, targets)
                loss.backward()
                opt.step()
    events = list(prof.events())
    # The same events export_chrome_trace writes (it skips those without a trace name).
    events = [e for e in events if e.trace_name is not None and not e.is_remote]
    if not full:
        last = [e for e in events if e.name == "step#1"]
        start, end = last[0].time_range.start, last[0].time_range.end
        events = [e for e in events if start <= e.time_range.start <= end]
        events = [e for e in events if e.name not in VIEW_OPS]
    trace = [{"name": e.trace_name, "ph": "X", "ts": e.time_range.start,
              "dur": e.time_range.elapsed_us(), "tid": e.thread, "pid": "CPU functions",
              "args": {}} for e in events]
    shapes = [{"name": e.name, "tid": e.thread, "ts": e.time_range.start,
               "input_shapes": e.input_shapes} for e in events
              if e.name in SHAPE_OPS or full and e.input_shapes]
    with open(prefix + ".trace.json", "w") as f:
        # One event a line: the committed file diffs and reads like the format torch writes.
        f.write("[\n" + ",\n".join(json.dumps(e) for e in trace) + "\n]\n")
    side = {"version": 1, "format": "pipesched-op-shapes", "device": "cpu",
            "input_type": "float", "torch": torch.__version__,
            "recorded_by": "scripts/record_trace.py", "ops": shapes}
    with open(prefix + ".shapes.json", "w") as f:
        f.write(json.dumps({k: v for k, v in side.items() if k != "ops"})[:-1] + ',\n "ops": [\n')
        f.write(",\n".join(json.dumps(o) for o in shapes) + "\n]}\n")
    print(f"wrote {prefix}.trace.json ({len(trace)} events) and {prefix}.shapes.json "
          f"({len(shapes)} ops); loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
