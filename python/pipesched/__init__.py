"""pipesched: generate, validate, simulate pipeline-parallel training schedules.

Bindings of the C++ library (pybind11). A quick tour::

    import pipesched
    s = pipesched.generate("zb-h1", stages=4, microbatches=8)
    assert pipesched.validate(s).ok
    r = pipesched.simulate(s, cost=(1, 1, 1))
    print(r.makespan, r.bubble_rate, pipesched.check_memory(s).max_peak)
    print(pipesched.to_torch_actions(s, csv_layout="list")[0])

Keyword arguments carry the names of the `pipesched` CLI's long options (--stages,
--microbatches, --chunks, --cost, --costs, --memory, --memory-file, --memory-limit, ...).
Invalid input raises InvalidArgument (a ValueError) with the library's message.
"""

from ._pipesched import *  # noqa: F401,F403
from ._pipesched import __version__, HAS_NUMPY, InvalidArgument  # noqa: F401
from . import _pipesched as _ext

__all__ = [name for name in dir(_ext) if not name.startswith("_")]
