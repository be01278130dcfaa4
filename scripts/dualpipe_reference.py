#!/usr/bin/env python3
"""Records deepseek-ai/DualPipe's `DualPipe.step()` order, rank by rank, without torch or GPUs.

Usage: scripts/dualpipe_reference.py SNAPSHOT [OUT]
  SNAPSHOT  a checkout of github.com/deepseek-ai/DualPipe (the directory holding `dualpipe/`)
  OUT       where to write the JSON (default: tests/data/dualpipe_reference.json)

Their code runs unchanged. This script installs stand-ins for `torch`, `torch.nn`,
`torch.distributed` and `torch.autograd` in sys.modules before importing it; the stand-ins
record what their code asks for:
  - a stage's forward: the call of module 0 or 1 of the rank (its own micro-batch counter,
    which is their `chunk_id`, since their forwards of one module run in micro-batch order);
  - a backward: `run_backward` / `loss.backward()` on the outputs of a recorded forward (so the
    micro-batch comes from their own bookkeeping); "B" when their `WeightGradStore.enabled`
    is set (the weight gradient is deferred: the stand-in puts a closure in their store), "BW"
    otherwise;
  - a weight gradient "W": the deferred closure, run when their `WeightGradStore.pop()` runs it;
  - an overlapped pair: their `_forward_backward_compute_chunk` calls the module class's
    `overlapped_forward_backward` (the stand-in modules define it), recorded as the F marked
    `overlap` followed by the BW it overlaps with.
Communication does not block (a receive yields an empty stand-in tensor), so each rank runs
alone. Module 0 of rank r is stage r of the direction entering at rank 0; module 1 is stage
p-1-r of the direction entering at rank p-1 (their example_dualpipe.py: full_modules[rank],
full_modules[pp_size - 1 - rank]). Micro-batches are numbered within their direction (their
`chunk_id`, 0 .. m/2-1).
"""

import json
import os
import subprocess
import sys
import types

RECORD = []  # the current rank's ops, in its order


class _Device:
    def __init__(self, *args):
        self.args = args

    def __eq__(self, other):
        return isinstance(other, _Device)


class _Tensor:
    """A stand-in tensor: `tag` is (module, micro-batch) for a forward's output."""

    def __init__(self, tag=None):
        self.tag = tag
        self.grad = None
        self._base = None
        self.data = None

    def tensor_split(self, chunks, dim=0):
        return [_Tensor(("input", i)) for i in range(chunks)]

    def backward(self):  # a loss: the backward of the last stage
        _backward(self.tag)

    def detach_(self):
        return self


def _backward(tag):
    from dualpipe.utils import WeightGradStore  # theirs: decides B (deferred W) or BW

    module, mb = tag
    if WeightGradStore.enabled:
        RECORD.append(["B", module, mb, 0])
        WeightGradStore.put(lambda: RECORD.append(["W", module, mb, 0]))
    else:
        RECORD.append(["BW", module, mb, 0])


class _Module:
    def __init__(self, *args, **kwargs):
        pass


class _ModuleList(list):
    def __init__(self, modules):
        super().__init__(modules)


class _Stage(_Module):
    def __init__(self, index):
        super().__init__()
        self.index = index
        self.calls = 0

    def parameters(self):
        return iter([types.SimpleNamespace(device=_Device(0))])

    def _forward(self, overlap):
        mb = self.calls
        self.calls += 1
        RECORD.append(["F", self.index, mb, overlap])
        return _Tensor((self.index, mb))

    def __call__(self, *inputs):
        return self._forward(0)

    @staticmethod
    def overlapped_forward_backward(module0, inputs0, criterion0, labels0, module1, loss1,
                                    outputs1, output_grads1):
        out = module0._forward(1)
        _backward(loss1.tag if loss1 is not None else outputs1[0].tag)
        loss0 = criterion0(out, *labels0) if criterion0 is not None else None
        return [out], loss0


class _Group:
    def __init__(self, size, rank):
        self._size, self._rank = size, rank

    def size(self):
        return self._size

    def rank(self):
        return self._rank


class _Request:
    def wait(self):
        pass


GROUP = _Group(1, 0)


def _install_stand_ins():
    torch = types.ModuleType("torch")
    torch.Tensor = _Tensor
    torch.dtype = type("dtype", (), {})
    torch.float32 = torch.dtype()
    torch.device = _Device
    torch.cuda = types.SimpleNamespace(current_device=lambda: 0)
    torch.is_grad_enabled = lambda: True
    torch.stack = lambda xs: list(xs)
    torch.empty = lambda *a, **k: _Tensor()
    torch.cat = lambda xs, dim=0: _Tensor()

    nn = types.ModuleType("torch.nn")
    nn.Module = _Module
    nn.ModuleList = _ModuleList
    torch.nn = nn

    dist = types.ModuleType("torch.distributed")
    dist.ProcessGroup = _Group
    dist.P2POp = lambda fn, tensor, peer: (fn, tensor, peer)
    dist.irecv = lambda *a, **k: None
    dist.isend = lambda *a, **k: None
    dist.batch_isend_irecv = lambda ops: [_Request() for _ in ops]
    dist.distributed_c10d = types.SimpleNamespace(
        _get_default_group=lambda: GROUP, get_global_rank=lambda group, r: r)
    dist.get_rank = lambda: GROUP.rank()
    torch.distributed = dist

    autograd = types.ModuleType("torch.autograd")

    def run_backward(tensors, grad_tensors, **kwargs):
        _backward(tensors[0].tag)

    autograd.Variable = types.SimpleNamespace(
        _execution_engine=types.SimpleNamespace(run_backward=run_backward))
    torch.autograd = autograd

    sys.modules.update({"torch": torch, "torch.nn": nn, "torch.distributed": dist,
                        "torch.autograd": autograd})


def record(p, m):
    from dualpipe import DualPipe, set_p2p_tensor_dtype, set_p2p_tensor_shapes

    set_p2p_tensor_shapes([(1, 1)])
    set_p2p_tensor_dtype(sys.modules["torch"].float32)
    ranks = []
    for r in range(p):
        GROUP._size, GROUP._rank = p, r
        RECORD.clear()
        pipe = DualPipe((_Stage(0), _Stage(1)))
        edge = r == 0 or r == p - 1
        inputs = (_Tensor(),) if edge else ()
        criterion = (lambda out, *labels: _Tensor(out.tag)) if edge else None
        labels = (_Tensor(),) if edge else []
        pipe.step(*inputs, num_chunks=m, criterion=criterion, labels=labels)
        ranks.append(list(RECORD))
    return ranks


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    snapshot = os.path.abspath(sys.argv[1])
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "tests", "data",
                                                              "dualpipe_reference.json")
    _install_stand_ins()
    sys.path.insert(0, snapshot)
    shapes = {4: [8, 10, 12, 16], 6: [12, 14, 18, 24], 8: [16, 18, 20, 32]}
    orders = [{"p": p, "m": m, "ranks": record(p, m)} for p, ms in shapes.items() for m in ms]
    commit = os.environ.get("DUALPIPE_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "-C", snapshot, "rev-parse", "HEAD"],
                                    capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = "unknown"
    doc = {
        "source": {
            "repository": "https://github.com/deepseek-ai/DualPipe",
            "commit": commit,
            "code": "dualpipe/dualpipe.py, DualPipe.step(), run unchanged",
            "how": "scripts/dualpipe_reference.py: stand-ins for torch, torch.nn, "
                   "torch.distributed and torch.autograd record each rank's forward, backward "
                   "and weight-gradient calls; ranks run one at a time (non-blocking stand-in "
                   "communication)",
        },
        "op": "[kind, module, micro-batch, overlap]: kind F (forward), B (input gradient, weight "
              "gradient deferred to their WeightGradStore), BW (full backward), W (a deferred "
              "weight gradient, run FIFO by WeightGradStore.pop); module 0 is stage r of the "
              "direction entering at rank 0, module 1 stage p-1-r of the direction entering at "
              "rank p-1; micro-batch numbered within its direction (0 .. m/2-1); overlap 1 on "
              "an F their code runs overlapped (overlapped_forward_backward) with the BW after it",
        "orders": orders,
    }
    with open(out, "w") as f:
        f.write(json.dumps(doc, indent=None, separators=(",", ":")).replace('{"p"', '\n{"p"'))
        f.write("\n")


if __name__ == "__main__":
    main()
