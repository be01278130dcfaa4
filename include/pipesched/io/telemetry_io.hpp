#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesched/analysis/telemetry.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/timed_op.hpp"

// Reading measured op timings (analysis/telemetry.hpp's measured_run) from
// - the Chrome traces pipesched writes (io/chrome_trace.hpp: `simulate --format chrome`, an
//   instrumented_executor run drawn with timeline_from_measured, `mlp_pipeline_mpi --trace`):
//   complete events ("ph":"X") with the stage as tid (p + s for the second op of an
//   overlapped pair), the kind as category, args {mb, chunk, global_chunk, index, recompute},
//   ts / dur in microseconds, and otherData {p, m, v, schedule}; communication events are
//   skipped;
// - a plain CSV with the header `stage,kind,mb,chunk,start,end` (optionally `,global_chunk`),
//   kinds by their short names (F, B, W, BW), times in any one unit.

namespace pipesched {

namespace detail {

/// The placement the (stage, local chunk) -> global chunk pairs describe: sequential, V or
/// loop when they match one, else custom. `who` prefixes errors.
inline placement placement_from_pairs(
    std::uint32_t p,
    std::uint32_t v,
    const std::map<std::pair<stage_index, chunk_index>, global_chunk>& g,
    const std::string& who) {
  if (v == 1 && g.empty()) {
    return placement::sequential(p);
  }
  std::vector<global_chunk> table(std::size_t{p} * v);
  for (stage_index s = 0; s < p; ++s) {
    for (chunk_index c = 0; c < v; ++c) {
      const auto it = g.find({s, c});
      if (it == g.end()) {
        if (v == 1) {
          table[s] = global_chunk{s};  // one chunk per stage: global chunk = stage
          continue;
        }
        fail(who, ": no op of local chunk ", c, " on stage ", s,
             " gives its global chunk: the placement is unknown");
      }
      table[std::size_t{s} * v + c] = it->second;
    }
  }
  for (const placement& known :
       {placement::sequential(p), placement::v_shape(p), placement::loop(p, v)}) {
    if (known.chunks() != v) {
      continue;
    }
    bool same = true;
    for (stage_index s = 0; s < p && same; ++s) {
      for (chunk_index c = 0; c < v && same; ++c) {
        same = known.global(s, c) == table[std::size_t{s} * v + c];
      }
    }
    if (same) {
      return known;
    }
  }
  return placement::custom(p, v, std::move(table));
}

}  // namespace detail

/// The compute ops of a Chrome trace written by pipesched, in the trace's microseconds.
/// Throws invalid_argument naming the event and field for a trace it can't read.
inline measured_run read_chrome_trace_run(std::string_view text) {
  const std::string who = "chrome trace";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    detail::fail(who, ": not JSON: ", e.what());
  }
  auto count = [&](const nlohmann::json& obj, const char* key, const std::string& path) {
    if (!obj.contains(key) || !obj[key].is_number_unsigned() ||
        obj[key].get<std::uint64_t>() == 0) {
      detail::fail(who, ": ", path, "/", key, " must be a positive integer");
    }
    return obj[key].get<std::uint32_t>();
  };
  if (!j.is_object() || !j.contains("otherData") || !j.contains("traceEvents") ||
      !j["traceEvents"].is_array()) {
    detail::fail(who, ": needs the otherData and traceEvents of a pipesched trace");
  }
  const nlohmann::json& other = j["otherData"];
  measured_run run;
  const std::uint32_t p = count(other, "p", "/otherData");
  const std::uint32_t v = count(other, "v", "/otherData");
  run.microbatches = count(other, "m", "/otherData");
  if (other.contains("schedule") && other["schedule"].is_string()) {
    run.name = other["schedule"].get<std::string>();
  }
  std::map<std::pair<stage_index, chunk_index>, global_chunk> globals;
  const nlohmann::json& events = j["traceEvents"];
  for (std::size_t i = 0; i < events.size(); ++i) {
    const nlohmann::json& e = events[i];
    const std::string path = "/traceEvents/" + std::to_string(i);
    if (!e.is_object() || e.value("ph", "") != "X") {
      continue;
    }
    const std::string cat = e.value("cat", "");
    const auto kind = parse_op_kind(cat);
    if (cat == "comm") {
      continue;
    }
    if (!kind) {
      detail::fail(who, ": ", path, "/cat: unknown op kind \"", cat, "\"");
    }
    if (!e.contains("tid") || !e["tid"].is_number_unsigned()) {
      detail::fail(who, ": ", path, "/tid must be the stage (an unsigned integer)");
    }
    std::uint64_t tid = e["tid"].get<std::uint64_t>();
    if (tid >= p) {
      tid -= p;  // the second op of an overlapped pair
    }
    if (tid >= p) {
      detail::fail(who, ": ", path, "/tid (", e["tid"].get<std::uint64_t>(),
                   ") is not a stage of p=", p);
    }
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number()) {
      detail::fail(who, ": ", path, ": ts and dur must be numbers");
    }
    const nlohmann::json args = e.value("args", nlohmann::json::object());
    const std::uint32_t mb = args.value("mb", 0u);
    const auto chunk = static_cast<chunk_index>(args.value("chunk", 0u));
    if (mb >= run.microbatches || chunk >= v) {
      detail::fail(who, ": ", path, "/args: mb (", mb, ") or chunk (", chunk,
                   ") out of range (m=", run.microbatches, ", v=", v, ")");
    }
    const auto s = static_cast<stage_index>(tid);
    if (args.contains("global_chunk") && args["global_chunk"].is_number_unsigned()) {
      globals[{s, chunk}] = args["global_chunk"].get<global_chunk>();
    }
    const double ts = e["ts"].get<double>();
    const std::uint64_t index = args.value("index", std::uint64_t{0});
    if (index > max_stage_ops) {
      detail::fail(who, ": ", path, "/args: index (", index, ") is beyond max_stage_ops (",
                   max_stage_ops, ")");
    }
    op o{*kind, mb, chunk};
    if (args.contains("recompute")) {
      if (!args["recompute"].is_boolean()) {
        detail::fail(who, ": ", path, "/args/recompute must be true or false");
      }
      if (args["recompute"].get<bool>()) {
        if (o.kind != op_kind::forward) {
          detail::fail(who, ": ", path, "/args/recompute: only an F can be marked recompute, not ",
                       to_string(o.kind));
        }
        o = recomputing(o);
      }
    }
    run.ops.push_back(
        timed_op{s, static_cast<std::uint32_t>(index), o, ts, ts + e["dur"].get<double>()});
  }
  run.layout = detail::placement_from_pairs(p, v, globals, who);
  return run;
}

/// Measured ops from CSV text: a header `stage,kind,mb,chunk,start,end` (and optionally
/// `,global_chunk`), then one op per line. p, v and m are the largest indices + 1; with v > 1
/// the placement comes from the global_chunk column or `layout`. Throws invalid_argument naming
/// the line and the field.
inline measured_run read_timing_csv(std::string_view text,
                                    const std::optional<placement>& layout = std::nullopt) {
  std::istringstream in{std::string(text)};
  std::string line;
  std::size_t line_no = 0;
  auto where = [&] { return "timing csv line " + std::to_string(line_no); };
  if (!std::getline(in, line)) {
    detail::fail("timing csv: empty; the first line must be stage,kind,mb,chunk,start,end");
  }
  ++line_no;
  if (!line.empty() && line.back() == '\r') {
    line.pop_back();
  }
  const bool with_global = line == "stage,kind,mb,chunk,start,end,global_chunk";
  if (line != "stage,kind,mb,chunk,start,end" && !with_global) {
    detail::fail(where(),
                 ": the header must be stage,kind,mb,chunk,start,end[,global_chunk], got \"", line,
                 "\"");
  }
  measured_run run;
  std::map<std::pair<stage_index, chunk_index>, global_chunk> globals;
  std::uint32_t p = 0;
  std::uint32_t v = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.find_first_not_of(" \t") == std::string::npos) {
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) {
      cells.push_back(cell);
    }
    const std::size_t want = with_global ? 7 : 6;
    if (cells.size() != want) {
      detail::fail(where(), ": ", cells.size(), " fields, expected ", want);
    }
    auto number = [&](std::size_t i, const char* field) {
      std::size_t used = 0;
      double x = 0.0;
      try {
        x = std::stod(cells[i], &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != cells[i].size() || !std::isfinite(x)) {
        detail::fail(where(), ": ", field, " \"", cells[i], "\" is not a number");
      }
      return x;
    };
    auto index = [&](std::size_t i, const char* field) {
      const double x = number(i, field);
      if (x < 0 || x != std::floor(x) || x > 1e9) {
        detail::fail(where(), ": ", field, " (", cells[i], ") must be a whole number >= 0");
      }
      return static_cast<std::uint32_t>(x);
    };
    const auto kind = parse_op_kind(cells[1]);
    if (!kind) {
      detail::fail(where(), ": kind \"", cells[1], "\" is not an op kind (F, B, W, BW, ...)");
    }
    const stage_index s = index(0, "stage");
    const std::uint32_t mb = index(2, "mb");
    const std::uint32_t c = index(3, "chunk");
    if (c > 0xffff) {
      detail::fail(where(), ": chunk (", c, ") is too large");
    }
    const double start = number(4, "start");
    const double end = number(5, "end");
    if (end < start) {
      detail::fail(where(), ": end (", end, ") is before start (", start, ")");
    }
    if (with_global) {
      globals[{s, static_cast<chunk_index>(c)}] = index(6, "global_chunk");
    }
    p = std::max(p, s + 1);
    v = std::max(v, c + 1);
    run.microbatches = std::max(run.microbatches, mb + 1);
    run.ops.push_back(timed_op{s, 0, op{*kind, mb, static_cast<chunk_index>(c)}, start, end});
  }
  if (run.ops.empty()) {
    detail::fail("timing csv: no ops after the header");
  }
  if (layout) {
    if (layout->stages() < p || layout->chunks() < v) {
      detail::fail("timing csv: the given placement (p=", layout->stages(),
                   ", v=", layout->chunks(), ") is smaller than the ops need (p=", p, ", v=", v,
                   ")");
    }
    run.layout = *layout;
  } else if (v > 1 && !with_global) {
    detail::fail("timing csv: ops of ", v,
                 " chunks per stage need a global_chunk column or a placement");
  } else {
    run.layout = detail::placement_from_pairs(p, v, globals, "timing csv");
  }
  return run;
}

/// A measured run from a Chrome trace (the text's first non-blank character is '{') or a timing
/// CSV (read_timing_csv): what `pipesched analyze` and Python's analyze() read.
inline measured_run read_measured_run(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '{' ? read_chrome_trace_run(text)
                                                               : read_timing_csv(text);
}

}  // namespace pipesched
