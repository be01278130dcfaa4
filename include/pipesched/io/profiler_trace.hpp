#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#ifdef PIPESCHED_HAVE_ZLIB
#include <zlib.h>
#endif

#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/io/json.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/model/kernel_calibration.hpp"

// torch.profiler traces read into what they measured (kernel_measurements,
// model/kernel_calibration.hpp), for `pipesched calibrate --trace` (docs/formats.md, "Profiler
// traces"). Two formats:
//  - Kineto's Chrome trace (`export_chrome_trace` of a Kineto-enabled torch): `cpu_op` events
//    with their inputs' shapes and types (`Input Dims`, `Input type`, recorded with
//    `record_shapes=True`), `cuda_runtime` / `cuda_driver` launches and GPU `kernel` events
//    sharing a correlation id (`args.correlation`). A kernel belongs to the innermost op running
//    on the launching thread when its launch is called.
//  - the legacy format (torch without Kineto, such as Debian's python3-torch 1.13): a JSON
//    array of complete events (name, ts, dur, tid) of the ops on the CPU, no shapes. The shapes
//    come from a side file the recording script writes from `prof.events()`
//    (scripts/record_trace.py), matched to events by name, thread and start time.
// Times are microseconds, as both formats write them.

namespace pipesched {

namespace detail {

/// One op event of a trace, with its place in the call tree of its thread.
struct trace_op {
  std::string name;
  std::string thread;  ///< pid and tid as the trace spells them
  double ts = 0.0;
  double dur = 0.0;
  std::size_t event = 0;
  bool has_shapes = false;
  std::vector<op_input> inputs;
  std::size_t parent = static_cast<std::size_t>(-1);
  bool gemm_below = false;      ///< a GEMM op runs inside it
  bool bytes_below = false;     ///< an op with a bytes rule runs inside it
  bool under_gemm = false;      ///< it runs inside a GEMM op
  double kernel_seconds = 0.0;  ///< kernels attributed to it
  std::size_t kernels = 0;
  bool gemm_kernel = false;      ///< one of them is a GEMM kernel
  bool tf32_kernel = false;      ///< one of them ran TF32 tensor ops
  bool only_elementwise = true;  ///< all of them are elementwise kernels

  double end() const noexcept { return ts + dur; }
};

inline constexpr std::size_t no_op = static_cast<std::size_t>(-1);

// The keys a trace reader uses; the rest (call stacks, occupancy, device properties) is
// dropped while parsing, which keeps a 35 MB trace's tree to a fraction of its size.
inline bool kept_trace_key(std::string_view k) {
  return k == "traceEvents" || k == "ph" || k == "cat" || k == "name" || k == "pid" || k == "tid" ||
         k == "ts" || k == "dur" || k == "args" || k == "Input Dims" || k == "Input type" ||
         k == "correlation" || k == "External id";
}

inline nlohmann::json parse_trace_json(std::string_view text, std::string_view what) {
  try {
    return nlohmann::json::parse(
        text.begin(), text.end(),
        [](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          return event != nlohmann::json::parse_event_t::key ||
                 kept_trace_key(parsed.get_ref<const std::string&>());
        });
  } catch (const nlohmann::json::exception& e) {
    fail(what, ": malformed JSON: ", e.what());
  }
}

/// The text of a thread id (a number or a string) as a key.
inline std::string thread_key(const nlohmann::json& event) {
  const auto pid = event.find("pid");
  const auto tid = event.find("tid");
  return (pid == event.end() ? std::string() : pid->dump()) + "/" +
         (tid == event.end() ? std::string() : tid->dump());
}

/// An op's inputs from Kineto's "Input Dims" and "Input type" (either may be missing; a
/// tensor list's nested dimensions are not a tensor's).
inline std::vector<op_input> read_inputs(const json_reader& dims, const json_reader* types) {
  std::vector<op_input> out(dims.array());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const json_reader d = dims[i];
    const std::size_t rank = d.array();
    const bool nested = rank > 0 && d.v.at(0).is_array();
    for (std::size_t j = 0; j < rank && !nested; ++j) {
      out[i].dims.push_back(d[j].integer(0, std::uint64_t{1} << 62));
    }
  }
  if (types != nullptr) {
    const std::size_t n = types->array();
    if (n != out.size()) {
      types->error("must have one type per input (", out.size(), " in \"Input Dims\"), not ", n);
    }
    for (std::size_t i = 0; i < n; ++i) {
      out[i].type = (*types)[i].string();
    }
  }
  return out;
}

/// Number of a trace event's key (ts, dur), finite and >= 0.
inline double event_time(const json_reader& e, std::string_view key, const std::string& name) {
  if (!e.has(key)) {
    json_reader{e.v, e.child(key)}.error("missing: the complete event ", json_reader::quote(name),
                                         " (ph \"X\") needs ",
                                         key == "dur" ? "a duration" : "a start time");
  }
  return e[key].non_negative();
}

/// Sets each op's parent (the innermost op of its thread that encloses it) and returns the ops
/// of each thread by start.
inline std::map<std::string, std::vector<std::size_t>> build_call_tree(std::vector<trace_op>& ops) {
  std::map<std::string, std::vector<std::size_t>> threads;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    threads[ops[i].thread].push_back(i);
  }
  for (auto& [thread, list] : threads) {
    // Outer first: by start, the longer first, then in the trace's order (an op and its only
    // child can share both ends at microsecond resolution; the profiler writes the outer first).
    std::sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
      return std::tuple(ops[a].ts, -ops[a].dur, a) < std::tuple(ops[b].ts, -ops[b].dur, b);
    });
    std::vector<std::size_t> open;
    for (const std::size_t i : list) {
      while (!open.empty() &&
             !(ops[i].ts >= ops[open.back()].ts && ops[i].end() <= ops[open.back()].end())) {
        open.pop_back();
      }
      ops[i].parent = open.empty() ? no_op : open.back();
      open.push_back(i);
    }
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const bool gemm = is_gemm_op(ops[i].name);
    const bool bytes = has_bytes_rule(ops[i].name);
    for (std::size_t p = ops[i].parent; p != no_op; p = ops[p].parent) {
      ops[p].gemm_below = ops[p].gemm_below || gemm;
      ops[p].bytes_below = ops[p].bytes_below || bytes;
      ops[i].under_gemm = ops[i].under_gemm || is_gemm_op(ops[p].name);
    }
  }
  return threads;
}

/// The innermost op of `thread` running at `t` (no_op if none).
inline std::size_t op_at(const std::vector<trace_op>& ops,
                         const std::map<std::string, std::vector<std::size_t>>& threads,
                         const std::string& thread,
                         double t) {
  const auto it = threads.find(thread);
  if (it == threads.end()) {
    return no_op;
  }
  const auto& list = it->second;
  auto after = std::upper_bound(list.begin(), list.end(), t,
                                [&](double x, std::size_t i) { return x < ops[i].ts; });
  if (after == list.begin()) {
    return no_op;
  }
  for (std::size_t i = *std::prev(after); i != no_op; i = ops[i].parent) {
    if (ops[i].ts <= t && t <= ops[i].end()) {
      return i;
    }
  }
  return no_op;
}

/// The side file of a legacy trace (docs/formats.md): for each op event it describes, its
/// inputs, matched to the trace's op by (name, thread, start).
inline void apply_shapes_file(std::vector<trace_op>& ops, std::string_view text) {
  const nlohmann::json j = json_reader::parse(text, "shapes");
  const json_reader c{j, ""};
  c.object();
  c.version(1, "shapes");
  if (c["format"].string() != "pipesched-op-shapes") {
    c["format"].error("must be \"pipesched-op-shapes\" (a shapes file of scripts/record_trace.py)");
  }
  const std::string default_type = c.has("input_type") ? c["input_type"].string() : "";
  std::map<std::tuple<std::string, std::string, double>, std::size_t> by_key;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    by_key.emplace(std::tuple(ops[i].name, ops[i].thread, ops[i].ts), i);
  }
  const json_reader list = c["ops"];
  const std::size_t n = list.array();
  for (std::size_t k = 0; k < n; ++k) {
    const json_reader e = list[k];
    e.object({"name", "tid", "ts", "input_shapes", "input_types"});
    const std::string name = e["name"].string();
    const double ts = e["ts"].non_negative();
    // The legacy format's pid is always "CPU functions"; its tid is the recording thread.
    const std::string thread = "\"CPU functions\"/" + e["tid"].v.dump();
    const auto at = by_key.find({name, thread, ts});
    if (at == by_key.end()) {
      e.error("no event ", json_reader::quote(name), " on thread ", e["tid"].v.dump(), " at ts ",
              e["ts"].v.dump(), " in the trace: the shapes file is not this trace's");
    }
    trace_op& op = ops[at->second];
    if (op.has_shapes) {
      e.error("describes the event ", json_reader::quote(name), " at ts ", e["ts"].v.dump(),
              " a second time");
    }
    const json_reader types_reader = e.has("input_types") ? e["input_types"] : e;
    op.inputs = read_inputs(e["input_shapes"], e.has("input_types") ? &types_reader : nullptr);
    if (!e.has("input_types")) {
      for (op_input& in : op.inputs) {
        in.type = in.dims.empty() ? "" : default_type;
      }
    }
    op.has_shapes = true;
  }
}

}  // namespace detail

/// Reads a torch.profiler trace (the JSON text of either format; `shapes` the side file of a
/// legacy trace, empty for none) into what it measured. GEMM ops are the innermost ops of
/// is_gemm_op; on a GPU their time is the sum of the kernels launched inside them, on a
/// CPU-only run (no kernel events) their own duration. Elementwise ops of known bytes outside
/// GEMMs likewise. Throws invalid_argument naming the JSON pointer of what is wrong: not JSON,
/// neither an array of events nor an object with "traceEvents", a complete event without a
/// name, start or duration, inputs that are not lists of dimensions, a shapes file given with a
/// Kineto trace or not matching the trace's events; and gemm_shape_of's error for a GEMM op
/// whose shapes do not multiply, prefixed with its event's pointer.
inline kernel_measurements read_profiler_trace(std::string_view text,
                                               std::string_view shapes = {}) {
  using detail::json_reader;
  const nlohmann::json j = detail::parse_trace_json(text, "profiler trace");
  const json_reader root{j, ""};
  const bool legacy_array = j.is_array();
  if (!legacy_array && !j.is_object()) {
    root.error(
        "must be an object with \"traceEvents\" (Kineto) or an array of events (the "
        "legacy format), not ",
        j.type_name());
  }
  if (!legacy_array && !root.has("traceEvents")) {
    root.error("no \"traceEvents\": not a Chrome trace of torch.profiler");
  }
  const json_reader events = legacy_array ? root : root["traceEvents"];
  const std::size_t n = events.array();
  kernel_measurements m;
  m.events = n;
  // Kineto marks its events with a category; the legacy format has none.
  bool kineto = false;
  for (std::size_t i = 0; i < n && !kineto; ++i) {
    const nlohmann::json& e = events.v.at(i);
    if (!e.is_object() || !e.contains("cat") || !e.at("cat").is_string()) {
      continue;
    }
    const auto& cat = e.at("cat").get_ref<const std::string&>();
    kineto = cat == "cpu_op" || cat == "kernel" || cat == "cuda_runtime" || cat == "Operator";
  }
  m.format = kineto ? "kineto" : "legacy";
  if (kineto && !shapes.empty()) {
    detail::fail(
        "shapes: given with a Kineto trace, which carries its own shapes (\"Input "
        "Dims\"): a shapes file is for the legacy format");
  }

  struct traced_kernel {
    std::string name;
    double dur = 0.0;
    bool memcpy = false;
    std::optional<std::uint64_t> correlation, external_id;
  };
  std::vector<detail::trace_op> ops;
  std::vector<traced_kernel> kernels;
  std::unordered_map<std::uint64_t, std::pair<std::string, double>> launches;  // correlation
  for (std::size_t i = 0; i < n; ++i) {
    const json_reader e = events[i];
    e.object();
    if (!e.has("ph")) {
      e.error("an event needs \"ph\" (its phase: \"X\" for a complete event)");
    }
    if (e["ph"].string() != "X") {
      continue;  // metadata, flows, instants: no time of their own
    }
    const std::string cat = e.has("cat") ? e["cat"].string() : std::string();
    if (!e.has("name")) {
      json_reader{e.v, e.child("name")}.error("missing: a complete event needs a name");
    }
    std::string name = e["name"].string();
    const double ts = detail::event_time(e, "ts", name);
    const double dur = detail::event_time(e, "dur", name);
    const auto arg_id = [&](std::string_view key) -> std::optional<std::uint64_t> {
      if (!e.has("args") || !e["args"].has(key)) {
        return std::nullopt;
      }
      return e["args"][key].integer(0, ~std::uint64_t{0});
    };
    if (!kineto || cat == "cpu_op" || cat == "Operator") {
      detail::trace_op op;
      op.name = std::move(name);
      op.thread = detail::thread_key(e.v);
      op.ts = ts;
      op.dur = dur;
      op.event = i;
      if (kineto && (is_gemm_op(op.name) || has_bytes_rule(op.name)) && e.has("args") &&
          e["args"].has("Input Dims")) {
        const json_reader args = e["args"];
        const json_reader types = args.has("Input type") ? args["Input type"] : args;
        op.inputs =
            detail::read_inputs(args["Input Dims"], args.has("Input type") ? &types : nullptr);
        op.has_shapes = true;
      }
      ops.push_back(std::move(op));
    } else if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "Runtime") {
      if (const auto c = arg_id("correlation")) {
        launches[*c] = {detail::thread_key(e.v), ts};
      }
    } else if (cat == "kernel" || cat == "Kernel" || cat == "gpu_memcpy" || cat == "Memcpy" ||
               cat == "gpu_memset" || cat == "Memset") {
      kernels.push_back({std::move(name), dur, cat != "kernel" && cat != "Kernel",
                         arg_id("correlation"), arg_id("External id")});
    }
  }
  if (!shapes.empty()) {
    try {
      detail::apply_shapes_file(ops, shapes);
    } catch (const invalid_argument& e) {
      const std::string_view what = e.what();
      detail::fail(what.rfind("shapes: ", 0) == 0 ? "" : "shapes: ", what);
    }
  }
  const auto threads = detail::build_call_tree(ops);
  m.device_kernels = !kernels.empty();

  if (m.device_kernels) {
    // Without launch events (a trace cut down to ops and kernels), a kernel's "External id" is
    // its op's, as Kineto writes it.
    std::unordered_map<std::uint64_t, std::size_t> by_external;
    if (launches.empty()) {
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const json_reader e = events[ops[i].event];
        if (e.has("args") && e["args"].has("External id")) {
          by_external[e["args"]["External id"].integer(0, ~std::uint64_t{0})] = i;
        }
      }
    }
    for (const traced_kernel& k : kernels) {
      const kernel_category c = k.memcpy ? kernel_category::other : kernel_category_of(k.name);
      const double s = k.dur * 1e-6;
      m.seconds_by_category[static_cast<std::size_t>(c)] += s;
      std::size_t launcher = detail::no_op;
      if (k.correlation) {
        if (const auto l = launches.find(*k.correlation); l != launches.end()) {
          launcher = detail::op_at(ops, threads, l->second.first, l->second.second);
        }
      }
      if (launcher == detail::no_op && launches.empty() && k.external_id) {
        if (const auto x = by_external.find(*k.external_id); x != by_external.end()) {
          launcher = x->second;
        }
      }
      // The GEMM op it runs for (split-K reduce and bias copies included), else its own op.
      std::size_t owner = launcher;
      for (std::size_t p = launcher; p != detail::no_op; p = ops[p].parent) {
        if (is_gemm_op(ops[p].name)) {
          owner = p;
          break;
        }
      }
      if (owner == detail::no_op) {
        m.gemm_kernels_outside_ops += c == kernel_category::gemm ? 1 : 0;
        continue;
      }
      detail::trace_op& o = ops[owner];
      if (c == kernel_category::gemm && !is_gemm_op(o.name)) {
        ++m.gemm_kernels_outside_ops;
      }
      o.kernel_seconds += s;
      ++o.kernels;
      o.gemm_kernel = o.gemm_kernel || c == kernel_category::gemm;
      o.tf32_kernel = o.tf32_kernel || (c == kernel_category::gemm && is_tf32_kernel(k.name));
      o.only_elementwise = o.only_elementwise && c == kernel_category::elementwise;
    }
  } else {
    // A CPU-only run: each op's own time (its children's taken out) by its name's category.
    std::vector<double> own(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      own[i] += ops[i].dur;
      if (ops[i].parent != detail::no_op) {
        own[ops[i].parent] -= ops[i].dur;
      }
    }
    for (std::size_t i = 0; i < ops.size(); ++i) {
      m.seconds_by_category[static_cast<std::size_t>(op_category_of(ops[i].name))] +=
          std::max(own[i], 0.0) * 1e-6;
    }
  }

  for (const detail::trace_op& o : ops) {
    const double seconds = m.device_kernels ? o.kernel_seconds : o.dur * 1e-6;
    if (is_gemm_op(o.name) && !o.gemm_below) {
      if (!o.has_shapes) {
        ++m.gemm_ops_without_shapes;
        continue;
      }
      if (m.device_kernels && !o.gemm_kernel) {
        ++m.gemm_ops_without_kernels;
        continue;
      }
      measured_gemm g;
      g.op = o.name;
      try {
        g.shape = gemm_shape_of(o.name, o.inputs);
      } catch (const invalid_argument& e) {
        events[o.event].error(e.what());
      }
      const std::size_t a = gemm_operand_index(o.name);
      g.precision = gemm_precision_of(a < o.inputs.size() ? o.inputs[a].type : std::string_view(),
                                      o.tf32_kernel);
      g.seconds = seconds;
      g.kernels = o.kernels;
      g.event = o.event;
      m.gemms.push_back(std::move(g));
    } else if (has_bytes_rule(o.name) && o.has_shapes && !o.under_gemm && !o.bytes_below &&
               (!m.device_kernels || (o.kernels > 0 && o.only_elementwise))) {
      if (const auto bytes = elementwise_bytes_of(o.name, o.inputs)) {
        m.memory_ops.push_back({o.name, *bytes, seconds, o.kernels, o.event});
      }
    }
  }
  return m;
}

/// Gzip-compressed text (a `.json.gz` trace) decompressed; at most max_text_file_bytes.
/// Without zlib (a build without PIPESCHED_HAVE_ZLIB) throws invalid_argument telling the user
/// to decompress the file first.
inline std::string gunzip_text(const std::string& data, const std::string& path) {
#ifdef PIPESCHED_HAVE_ZLIB
  z_stream z{};
  // 15 + 32: any window size, gzip or zlib header detected.
  if (inflateInit2(&z, 15 + 32) != Z_OK) {
    detail::fail(path, ": cannot start zlib");
  }
  std::string out;
  std::vector<char> buf(std::size_t{1} << 20);
  std::size_t at = 0;
  int rc = Z_OK;
  while (true) {
    const std::size_t chunk = std::min<std::size_t>(data.size() - at, std::size_t{1} << 30);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + at));
    z.avail_in = static_cast<uInt>(chunk);
    z.next_out = reinterpret_cast<Bytef*>(buf.data());
    z.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&z, Z_NO_FLUSH);
    at += chunk - z.avail_in;
    out.append(buf.data(), buf.size() - z.avail_out);
    if (out.size() > max_text_file_bytes) {
      inflateEnd(&z);
      detail::fail(path, ": decompressed, the trace must be at most ", max_text_file_bytes,
                   " bytes");
    }
    if (rc == Z_STREAM_END) {
      if (at == data.size()) {
        break;
      }
      inflateReset(&z);  // another gzip member follows (`cat a.gz b.gz`)
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      break;
    }
    if (rc == Z_BUF_ERROR && at == data.size()) {
      break;  // the input ended before the stream did
    }
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    detail::fail(path, ": not a valid gzip file (zlib: ", z.msg ? z.msg : "truncated", ")");
  }
  return out;
#else
  (void)data;
  detail::fail(path,
               ": is gzip-compressed, and this build of pipesched reads no gzip (built "
               "without zlib): decompress it first (gunzip -k ",
               path, ")");
#endif
}

/// True when the bytes start like a gzip file.
inline bool is_gzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

/// Reads a trace file: a torch.profiler trace (JSON, or gzip-compressed JSON as torch writes
/// `.json.gz`) and, for a legacy trace, its shapes file (empty path: none). Errors are
/// invalid_argument starting with the file's path.
inline kernel_measurements load_profiler_trace(const std::string& path,
                                               const std::string& shapes_path = {}) {
  std::string text = read_text_file(path);
  if (is_gzip(text)) {
    text = gunzip_text(text, path);
  }
  std::string shapes;
  if (!shapes_path.empty()) {
    shapes = read_text_file(shapes_path);
    if (shapes.empty()) {
      detail::fail(shapes_path, ": the shapes file is empty");
    }
  }
  try {
    return read_profiler_trace(text, shapes);
  } catch (const invalid_argument& e) {
    // The library says "shapes: ..." of the shapes file; here it is named by its path.
    const std::string_view what = e.what();
    if (what.rfind("shapes: ", 0) == 0 && !shapes_path.empty()) {
      detail::fail(shapes_path, ": ", what.substr(8));
    }
    detail::fail(path, ": ", what);
  }
}

}  // namespace pipesched
