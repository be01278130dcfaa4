// The `pipesched._pipesched` extension module: the schedule IR (ops, placements, schedules) and
// the module itself; generators, analysis and I/O are bound in their own translation units.

#include <cstddef>
#include <optional>
#include <pybind11/numpy.h>
#include <pybind11/operators.h>
#include <string>
#include <vector>

#include <pipesched/io/text.hpp>
#include <pipesched/ir/op.hpp>
#include <pipesched/ir/placement.hpp>
#include <pipesched/ir/schedule.hpp>
#include <pipesched/version.hpp>

#include "bindings.hpp"

namespace pipesched::python {

namespace {

bool numpy_available = false;

/// `F3`, `F3.1` (local chunk 1); a trailing `+` marks an op that overlaps the next one, `~` an F
/// marked recompute (flags are part of an op's identity, so the repr shows them).
std::string short_name(const op& o) {
  return to_string(o, o.chunk != 0) + (overlaps_next(o) ? "+" : "") + (is_recomputed(o) ? "~" : "");
}

op_kind kind_arg(const py::object& kind) {
  if (py::isinstance<py::str>(kind)) {
    const auto name = kind.cast<std::string>();
    if (const auto k = parse_op_kind(name)) {
      return *k;
    }
    std::string known;
    for (op_kind k : all_op_kinds) {
      known += (known.empty() ? "" : ", ") + std::string(to_string(k));
    }
    detail::fail("Op: kind \"", name, "\" is not an op kind (known: ", known, ")");
  }
  return kind.cast<op_kind>();
}

op make_py_op(const py::object& kind,
              microbatch_index mb,
              chunk_index chunk,
              bool overlap_next,
              bool recompute) {
  op o = make_op(kind_arg(kind), mb, chunk);
  if (recompute) {
    if (o.kind != op_kind::forward) {
      detail::fail("Op: recompute marks an F only, not ", to_string(o.kind));
    }
    o = recomputing(o);
  }
  return overlap_next ? overlapping_next(o) : o;
}

std::vector<std::vector<op>> all_ops(const schedule& s) {
  std::vector<std::vector<op>> out;
  out.reserve(s.stages());
  for (stage_index st = 0; st < s.stages(); ++st) {
    out.push_back(s.stage_ops(st));
  }
  return out;
}

void set_all_ops(schedule& s, const std::vector<std::vector<op>>& ops) {
  if (ops.size() != s.stages()) {
    detail::fail("Schedule: ops has ", ops.size(),
                 " stage list(s), must have one per stage (p=", s.stages(), ")");
  }
  for (stage_index st = 0; st < s.stages(); ++st) {
    s.stage_ops(st) = ops[st];
  }
}

stage_index stage_arg(const schedule& s, stage_index st) {
  if (st >= s.stages()) {
    throw py::index_error(detail::concat("stage ", st, " out of range (p=", s.stages(), ")"));
  }
  return st;
}

std::string schedule_repr(const schedule& s) {
  constexpr std::size_t shown = 8;  // ops per stage before "..."
  std::string out = detail::concat("Schedule(name='", s.name(), "', p=", s.stages(),
                                   ", m=", s.microbatches(), ", v=", s.chunks(), ", ops=[");
  for (stage_index st = 0; st < s.stages(); ++st) {
    out += st == 0 ? "[" : ", [";
    const auto ops = s.ops(st);
    for (std::size_t i = 0; i < ops.size() && i < shown; ++i) {
      out += (i == 0 ? "" : ", ") + short_name(ops[i]);
    }
    out += ops.size() > shown ? ", ...]" : "]";
  }
  return out + "])";
}

}  // namespace

py::object number_list(const std::vector<double>& v) {
  if (numpy_available) {
    return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data());
  }
  return py::cast(v);
}

void bind_ir(py::module_& m) {
  // Every kind of the library's table, under its short name: a new kind needs no change here.
  py::enum_<op_kind> kind(m, "OpKind",
                          "What an op computes or moves; the short names of the "
                          "text, JSON and CSV formats (F, B, W, BW, SEND_F, ...).");
  for (op_kind k : all_op_kinds) {
    kind.value(std::string(to_string(k)).c_str(), k);
  }
  kind.def_property_readonly("is_compute", [](op_kind k) { return is_compute(k); })
      .def_property_readonly("is_comm", [](op_kind k) { return is_comm(k); });
  // Replaces (not overloads) pybind11's "OpKind.F": str(kind) is the short name, as in the formats.
  kind.attr("__str__") = py::cpp_function([](op_kind k) { return std::string(to_string(k)); },
                                          py::name("__str__"), py::is_method(kind));

  py::class_<op>(m, "Op",
                 "One entry of a stage's op list: kind, micro-batch, local chunk, and whether it "
                 "runs overlapped with the next op of its stage. repr: F3, F3.1 (chunk 1), F7+ "
                 "(overlaps the next op), F2~ (marked recompute).")
      .def(py::init(&make_py_op), py::arg("kind"), py::arg("mb"), py::arg("chunk") = 0,
           py::arg("overlap_next") = false, py::arg("recompute") = false,
           "Op('F', 3) or Op(OpKind.B, 0, chunk=1); kind is an OpKind or its short name; "
           "recompute marks an F whose activations an R rebuilds before its backward.")
      .def_readonly("kind", &op::kind)
      .def_readonly("mb", &op::mb)
      .def_readonly("chunk", &op::chunk)
      .def_property_readonly(
          "overlap_next", [](const op& o) { return overlaps_next(o); },
          "True when the op runs overlapped with the next op of its stage.")
      .def_property_readonly(
          "recompute", [](const op& o) { return is_recomputed(o); },
          "True for an F marked recompute (an R re-runs it).")
      .def("same_work", &same_work, py::arg("other"),
           "The same computation (kind, micro-batch, chunk), whatever the overlap mark.")
      .def(py::self == py::self)
      .def(py::self != py::self)
      .def("__hash__",
           [](const op& o) {
             return py::hash(py::make_tuple(static_cast<int>(o.kind), o.mb, o.chunk, o.flags));
           })
      .def("__repr__", &short_name)
      .def("__str__", &short_name);

  py::class_<placement>(m, "Placement",
                        "How model chunks are laid out over stages: (stage, local chunk) <-> "
                        "global chunk (PyTorch's stage index).")
      .def_static("sequential", &placement::sequential, py::arg("stages"),
                  "One chunk per stage: global chunk g on stage g.")
      .def_static("loop", &placement::loop, py::arg("stages"), py::arg("chunks"),
                  "Megatron interleaving: local chunk c of stage s is global chunk c*p + s.")
      .def_static("v_shape", &placement::v_shape, py::arg("stages"),
                  "Two chunks per stage: stage s holds global chunks s and 2p-1-s.")
      .def_static("custom", &placement::custom, py::arg("stages"), py::arg("chunks"),
                  py::arg("table"),
                  "table[s*chunks + c] is the global chunk of local chunk c on stage s.")
      .def_property_readonly("stages", &placement::stages)
      .def_property_readonly("chunks", &placement::chunks)
      .def_property_readonly("total_chunks", &placement::total_chunks)
      .def_property_readonly(
          "kind", [](const placement& p) { return std::string(to_string(p.kind())); },
          "'sequential', 'loop', 'v' or 'custom'.")
      .def("global_chunk", &placement::global, py::arg("stage"), py::arg("chunk"))
      .def("stage_of", &placement::stage_of, py::arg("global_chunk"))
      .def("local_of", &placement::local_of, py::arg("global_chunk"))
      .def(py::self == py::self)
      .def("__repr__", [](const placement& p) {
        return detail::concat("Placement(kind='", to_string(p.kind()), "', stages=", p.stages(),
                              ", chunks=", p.chunks(), ")");
      });

  py::class_<schedule>(m, "Schedule",
                       "A pipeline schedule: stages p, micro-batches m, chunks per stage v, the "
                       "placement, and one ordered op list per stage. Build one freely and ask "
                       "validate() whether it is complete and deadlock-free.")
      .def(py::init([](std::uint32_t stages, std::uint32_t microbatches, std::string name,
                       const std::optional<std::vector<std::vector<op>>>& ops) {
             schedule s = schedule::sequential(std::move(name), stages, microbatches);
             if (ops) {
               set_all_ops(s, *ops);
             }
             return s;
           }),
           py::arg("stages"), py::arg("microbatches"), py::arg("name") = "",
           py::arg("ops") = py::none(),
           "One chunk per stage; ops: one list of Op per stage (default: empty lists).")
      .def(py::init([](const placement& pl, std::uint32_t microbatches, std::string name,
                       const std::optional<std::vector<std::vector<op>>>& ops) {
             schedule s = schedule::on(std::move(name), pl, microbatches);
             if (ops) {
               set_all_ops(s, *ops);
             }
             return s;
           }),
           py::arg("placement"), py::arg("microbatches"), py::arg("name") = "",
           py::arg("ops") = py::none(), "On a placement (several chunks per stage).")
      .def_property("name", &schedule::name, &schedule::set_name)
      .def_property_readonly("stages", &schedule::stages)
      .def_property_readonly("microbatches", &schedule::microbatches)
      .def_property_readonly("chunks", &schedule::chunks)
      .def_property_readonly("placement", &schedule::layout)
      .def_property("ops", &all_ops, &set_all_ops,
                    "The op lists, one Python list of Op per stage (a copy; assign to replace).")
      .def(
          "stage_ops",
          [](const schedule& s, stage_index st) { return s.stage_ops(stage_arg(s, st)); },
          py::arg("stage"), "Stage `stage`'s ops in execution order (a copy).")
      .def(
          "set_stage_ops",
          [](schedule& s, stage_index st, std::vector<op> ops) {
            s.stage_ops(stage_arg(s, st)) = std::move(ops);
          },
          py::arg("stage"), py::arg("ops"))
      .def("has_comm", &schedule::has_comm, "True when a stage holds SEND_* or RECV_* ops.")
      .def("__len__", &schedule::size, "Total number of ops over all stages.")
      .def(py::self == py::self)
      .def("__repr__", &schedule_repr)
      .def("__str__",
           [](const schedule& s) {
             std::string text = format_schedule_text(s);
             text.pop_back();  // print() adds the last newline
             return detail::concat(s.name().empty() ? "schedule" : s.name(), " p=", s.stages(),
                                   " m=", s.microbatches(), " v=", s.chunks(), "\n", text);
           })
      .def(py::pickle(
          [](const schedule& s) { return py::make_tuple(write_schedule_json(s)); },
          [](const py::tuple& t) { return read_schedule_json(t[0].cast<std::string>()); }));
}

}  // namespace pipesched::python

PYBIND11_MODULE(_pipesched, m) {
  using namespace pipesched;
  using namespace pipesched::python;
  m.doc() = "pipesched: generate, validate, simulate pipeline-parallel training schedules";
  m.attr("__version__") = detail::concat(PIPESCHED_VERSION_MAJOR, ".", PIPESCHED_VERSION_MINOR, ".",
                                         PIPESCHED_VERSION_PATCH);
  try {
    py::module_::import("numpy");
    numpy_available = true;
  } catch (const py::error_already_set&) {
    numpy_available = false;
  }
  m.attr("HAS_NUMPY") = numpy_available;
  // Invalid input (bad parameters, malformed files) carries the library's message.
  py::register_exception<invalid_argument>(m, "InvalidArgument", PyExc_ValueError);
  bind_ir(m);
  bind_gen(m);
  bind_analysis(m);
  bind_io(m);
  bind_plan(m);
  bind_planner(m);
  bind_pack(m);
}
