#pragma once

// Shared by the binding translation units: the helpers that turn the CLI-style keyword
// arguments (cost=, costs=, memory=, memory_file=) into the library's models. Thin on purpose:
// every rule (value ranges, table shapes) stays in the library, which throws
// pipesched::invalid_argument, seen in Python as pipesched.InvalidArgument (a ValueError).

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <string>
#include <vector>

#include <pipesched/io/cost_model_json.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/memory_model_json.hpp>
#include <pipesched/model/cost_model.hpp>
#include <pipesched/model/memory_limits.hpp>
#include <pipesched/model/memory_model.hpp>

// Stage, micro-batch and chunk indices (pipesched::detail::strong_index) are plain ints in
// Python; the kinds stay apart on the C++ side only.
namespace pybind11::detail {
template <class Tag, class Rep>
struct type_caster<pipesched::detail::strong_index<Tag, Rep>> {
  using index_type = pipesched::detail::strong_index<Tag, Rep>;
  PYBIND11_TYPE_CASTER(index_type, const_name("int"));

  bool load(handle src, bool convert) {
    make_caster<Rep> inner;
    if (!inner.load(src, convert)) {
      return false;
    }
    value = index_type{cast_op<Rep>(inner)};
    return true;
  }
  static handle cast(index_type src, return_value_policy policy, handle parent) {
    return make_caster<Rep>::cast(src.value, policy, parent);
  }
};
}  // namespace pybind11::detail

// `memory_limit=` everywhere: None, one number for every stage, or a sequence of one per stage
// (pipesched::memory_limits); returned the same way.
namespace pybind11::detail {
template <>
struct type_caster<pipesched::memory_limits> {
  PYBIND11_TYPE_CASTER(pipesched::memory_limits, const_name("None | float | list[float]"));

  bool load(handle src, bool convert) {
    if (src.is_none()) {
      value = pipesched::memory_limits{};
      return true;
    }
    if (make_caster<double> one;
        !pybind11::isinstance<pybind11::str>(src) && one.load(src, convert)) {
      value = cast_op<double>(one);
      return true;
    }
    if (make_caster<std::vector<double>> many;
        !pybind11::isinstance<pybind11::str>(src) && many.load(src, convert)) {
      value = cast_op<std::vector<double>&&>(std::move(many));
      return true;
    }
    return false;
  }
  static handle cast(const pipesched::memory_limits& l, return_value_policy, handle) {
    if (!l) {
      return pybind11::none().release();
    }
    if (l.uniform()) {
      return pybind11::float_(l.at(0)).release();
    }
    return pybind11::cast(l.values()).release();
  }
};
}  // namespace pybind11::detail

namespace pipesched::python {

namespace py = pybind11;

void bind_ir(py::module_& m);
void bind_gen(py::module_& m);
void bind_analysis(py::module_& m);
void bind_io(py::module_& m);
void bind_plan(py::module_& m);
void bind_planner(py::module_& m);
void bind_pack(py::module_& m);

/// `cost=` (a CostModel or a sequence TF, TB, TW[, TC], as the CLI's --cost) or `costs=` (a cost
/// model JSON file, the CLI's --costs); neither: unit costs, no T_comm (the CLI's default).
inline cost_model cost_arg(const py::object& cost, const std::optional<std::string>& costs_file) {
  if (!cost.is_none() && costs_file) {
    detail::fail("cost and costs: give one of them (costs reads a cost model file)");
  }
  if (costs_file) {
    try {
      return read_cost_model(read_text_file(*costs_file));
    } catch (const invalid_argument& e) {
      detail::fail("costs ", *costs_file, ": ", e.what());
    }
  }
  if (cost.is_none()) {
    return cost_model{};
  }
  if (py::isinstance<cost_model>(cost)) {
    return cost.cast<cost_model>();
  }
  std::vector<double> v;
  try {
    v = cost.cast<std::vector<double>>();
  } catch (const py::cast_error&) {
    detail::fail("cost: expected a CostModel or numbers (TF, TB, TW[, TC]), got ",
                 std::string(py::str(py::type::of(cost).attr("__name__"))));
  }
  if (v.size() < 3 || v.size() > 4) {
    detail::fail("cost: expected (TF, TB, TW[, TC]), got ", v.size(), " value(s)");
  }
  return cost_model::uniform(v[0], v[1], v[2], v.size() > 3 ? v[3] : 0.0);
}

/// `memory=` (a MemoryModel or MB, MW[, MIN], as the CLI's --memory) or `memory_file=` (a memory
/// model JSON file); neither: M_B = 1, M_W = 0.5 (the CLI's default).
inline memory_model memory_arg(const py::object& memory,
                               const std::optional<std::string>& memory_file) {
  if (!memory.is_none() && memory_file) {
    detail::fail("memory and memory_file: give one of them");
  }
  if (memory_file) {
    try {
      return read_memory_model(read_text_file(*memory_file));
    } catch (const invalid_argument& e) {
      detail::fail("memory_file ", *memory_file, ": ", e.what());
    }
  }
  if (memory.is_none()) {
    return memory_model{};
  }
  if (py::isinstance<memory_model>(memory)) {
    return memory.cast<memory_model>();
  }
  std::vector<double> v;
  try {
    v = memory.cast<std::vector<double>>();
  } catch (const py::cast_error&) {
    detail::fail("memory: expected a MemoryModel or numbers (MB, MW[, MIN]), got ",
                 std::string(py::str(py::type::of(memory).attr("__name__"))));
  }
  if (v.size() < 2 || v.size() > 3) {
    detail::fail("memory: expected (MB, MW[, MIN]), got ", v.size(), " value(s)");
  }
  // As the CLI's --memory: MIN is a chunk's input, what a recomputed F keeps (M_in).
  return memory_model(chunk_memory{v[0], v[1], 0.0, v.size() > 2 ? v[2] : 0.0});
}

/// A list of numbers: a numpy array when numpy is importable, else a Python list.
py::object number_list(const std::vector<double>& v);

/// `format=` of the front ends: one of `known`, else "format: must be 'json' or 'text', not ...".
inline const std::string& format_arg(const std::string& format,
                                     std::initializer_list<std::string> known) {
  if (std::find(known.begin(), known.end(), format) == known.end()) {
    std::string names;
    std::size_t i = 0;
    for (const std::string& k : known) {
      names += (i == 0 ? "" : i + 1 == known.size() ? " or " : ", ") + ("'" + k + "'");
      ++i;
    }
    detail::fail("format: must be ", names, ", not \"", format, "\"");
  }
  return format;
}

/// `format=` 'json' (the CLI's --json) or 'text': true for JSON.
inline bool json_format(const std::string& format) {
  return format_arg(format, {"json", "text"}) == "json";
}

/// A JSON document as Python objects, as json.loads reads its text (an object is a dict).
inline py::object python_json(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

}  // namespace pipesched::python
