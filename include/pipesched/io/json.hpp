#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"

namespace pipesched {

/// Version of the schedule JSON format written by write_schedule_json.
inline constexpr int schedule_json_version = 1;

/// The schedule as JSON, format version 1 (docs/formats.md):
///   {"version": 1, "name": "zb-h1", "stages": 4, "microbatches": 8, "chunks": 1,
///    "placement": "sequential",
///    "ops": [[{"kind": "F", "mb": 0, "chunk": 0}, ...], ...]}
/// `ops[s]` is stage s's list in execution order; `mb` is 0-based; `chunk` is the local chunk
/// on the stage (written only when chunks > 1); `placement` is "sequential", "loop", "v",
/// "dual" (two routes: micro-batches 0 .. m/2-1 enter at stage 0, the others at stage p-1) or
/// {"kind": "custom", "table": [...]} (table[s*chunks + c] = global chunk). Communication ops
/// also carry "peer": the stage on the other side of the transfer. An op marked to run
/// overlapped with the next op of its stage (overlaps_next) carries "overlap_next": true;
/// absent means not overlapped, so files from before the flag read unchanged. Likewise an F
/// marked recompute (is_recomputed: it keeps only its input until its R) carries
/// "recompute": true, and an R is {"kind": "R", ...}.
inline nlohmann::json schedule_to_json(const schedule& s) {
  nlohmann::json j;
  j["version"] = schedule_json_version;
  j["name"] = s.name();
  j["stages"] = s.stages();
  j["microbatches"] = s.microbatches();
  j["chunks"] = s.chunks();
  const placement& pl = s.layout();
  if (pl.kind() == placement_kind::custom) {
    nlohmann::json table = nlohmann::json::array();
    for (stage_index st = 0; st < s.stages(); ++st) {
      for (chunk_index c = 0; c < s.chunks(); ++c) {
        table.push_back(pl.global(st, c));
      }
    }
    j["placement"] = {{"kind", "custom"}, {"table", std::move(table)}};
  } else {
    j["placement"] = std::string(to_string(pl.kind()));
  }
  nlohmann::json ops = nlohmann::json::array();
  const bool chunked = s.chunks() > 1;
  for (stage_index st = 0; st < s.stages(); ++st) {
    nlohmann::json list = nlohmann::json::array();
    for (const op& o : s.ops(st)) {
      nlohmann::json e = {{"kind", std::string(to_string(o.kind))}, {"mb", o.mb}};
      if (chunked || o.chunk != 0) {
        e["chunk"] = o.chunk;
      }
      if (is_comm(o.kind)) {
        if (auto partner = comm_partner(pl, st, o)) {
          e["peer"] = partner->stage;
        }
      }
      if (overlaps_next(o)) {
        e["overlap_next"] = true;
      }
      if (is_recomputed(o)) {
        e["recompute"] = true;
      }
      list.push_back(std::move(e));
    }
    ops.push_back(std::move(list));
  }
  j["ops"] = std::move(ops);
  return j;
}

/// Reads a schedule from JSON format version 1, field by field. Unknown extra keys are
/// ignored. Every error is a pipesched::invalid_argument naming the JSON path:
/// `/ops/2/5/kind: unknown op kind "X"`. Out-of-range micro-batches or chunks are kept (the
/// validator reports them); only values that can't be represented are rejected.
inline schedule schedule_from_json(const nlohmann::json& j) {
  const detail::json_reader r{j, ""};
  r.object();
  r.version(schedule_json_version, "schedule");
  std::string name;
  if (r.has("name")) {
    name = r["name"].name();
  }
  const auto p = static_cast<std::uint32_t>(r["stages"].integer(1, max_stages));
  const auto m = static_cast<std::uint32_t>(r["microbatches"].integer(1, max_microbatches));
  std::uint32_t v = 1;
  if (r.has("chunks")) {
    v = static_cast<std::uint32_t>(r["chunks"].integer(1, std::numeric_limits<chunk_index>::max()));
  }
  if (std::uint64_t{p} * v > max_total_chunks) {
    r["chunks"].error("stages*chunks (", std::uint64_t{p} * v, ") must be at most ",
                      max_total_chunks);
  }
  placement pl = placement::loop(p, v);
  if (r.has("placement")) {
    const detail::json_reader pj = r["placement"];
    if (pj.v.is_string()) {
      const std::string k = pj.string();
      if (k == "sequential") {
        if (v != 1) {
          pj.error("\"sequential\" needs chunks = 1, not ", v);
        }
      } else if (k == "loop") {
        // the default
      } else if (k == "v") {
        if (v != 2) {
          pj.error("\"v\" needs chunks = 2, not ", v);
        }
        pl = placement::v_shape(p);
      } else if (k == "dual") {
        if (v != 2) {
          pj.error("\"dual\" needs chunks = 2, not ", v);
        }
        if (m % 2 != 0) {
          pj.error("\"dual\" needs an even microbatches (two routes of m/2 each), not ", m);
        }
        pl = placement::dual(p);
      } else {
        pj.error("unknown placement ", detail::json_reader::quote(k),
                 " (known: sequential, loop, v, dual, or {\"kind\": \"custom\", \"table\": "
                 "[...]})");
      }
    } else {
      pj.object();
      const detail::json_reader kind = pj["kind"];
      if (kind.string() != "custom") {
        kind.error("must be \"custom\" in object form, not ",
                   detail::json_reader::quote(kind.string()));
      }
      const detail::json_reader tj = pj["table"];
      const std::size_t n = tj.array();
      std::vector<global_chunk> table;
      table.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        table.push_back(static_cast<global_chunk>(tj[i].integer(0, std::uint64_t{p} * v - 1)));
      }
      try {
        pl = placement::custom(p, v, std::move(table));
      } catch (const invalid_argument& e) {
        tj.error(e.what());
      }
    }
  }
  schedule out = schedule::on(std::move(name), std::move(pl), m);
  const detail::json_reader ops = r["ops"];
  if (ops.array() != p) {
    ops.error("must hold one list per stage (stages=", p, "), not ", ops.v.size());
  }
  for (stage_index s = 0; s < p; ++s) {
    const detail::json_reader list = ops[s];
    const std::size_t n = list.array();
    auto& dst = out.stage_ops(s);
    dst.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const detail::json_reader e = list[i];
      e.object();
      const op_kind kind = e["kind"].kind(" (known: F B W BW R SEND_F RECV_F SEND_B RECV_B)");
      const auto mb = static_cast<microbatch_index>(
          e["mb"].integer(0, std::numeric_limits<microbatch_index>::max()));
      chunk_index chunk = 0;
      if (e.has("chunk")) {
        chunk = static_cast<chunk_index>(
            e["chunk"].integer(0, std::numeric_limits<chunk_index>::max()));
      }
      op o = make_op(kind, mb, chunk);
      if (e.has("overlap_next")) {
        const detail::json_reader ov = e["overlap_next"];
        if (!ov.v.is_boolean()) {
          ov.error("must be true or false, not ", ov.v.type_name());
        }
        if (ov.v.get<bool>()) {
          o = overlapping_next(o);
        }
      }
      if (e.has("recompute")) {
        const detail::json_reader rc = e["recompute"];
        if (!rc.v.is_boolean()) {
          rc.error("must be true or false, not ", rc.v.type_name());
        }
        if (rc.v.get<bool>() && kind != op_kind::forward) {
          rc.error("only an F can be marked recompute, not ", to_string(kind));
        }
        if (rc.v.get<bool>()) {
          o = recomputing(o);
        }
      }
      dst.push_back(o);
    }
  }
  return out;
}

/// Compact text with one line per stage list, so large files stay diffable.
inline std::string write_schedule_json(const schedule& s) {
  nlohmann::json j = schedule_to_json(s);
  nlohmann::json ops = std::move(j["ops"]);
  j.erase("ops");
  std::string head = j.dump();
  head.pop_back();  // the closing brace
  std::string out = head + ",\"ops\":[";
  for (std::size_t st = 0; st < ops.size(); ++st) {
    out += st == 0 ? "\n  " : ",\n  ";
    out += ops[st].dump();
  }
  out += ops.empty() ? "]}\n" : "\n]}\n";
  return out;
}

/// Parses the text of a schedule JSON file; errors name the JSON path.
inline schedule read_schedule_json(std::string_view text) {
  return schedule_from_json(detail::json_reader::parse(text, "schedule JSON"));
}

/// Largest file read_text_file() accepts: 1 GiB (a JSON schedule of about 45 million ops).
inline constexpr std::size_t max_text_file_bytes = std::size_t{1} << 30;

/// Reads a whole file into a string; invalid_argument naming the path when it can't, when it
/// is a directory, or when it holds more than `max_bytes` (so `/dev/zero` fails fast instead of
/// eating memory).
inline std::string read_text_file(const std::string& path,
                                  std::size_t max_bytes = max_text_file_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    detail::fail(path, ": is a directory, not a file");
  }
  if (std::filesystem::is_regular_file(path, ec) &&
      std::filesystem::file_size(path, ec) > max_bytes && !ec) {
    detail::fail(path, ": file size must be at most ", max_bytes, " bytes");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    detail::fail(path, ": cannot open file");
  }
  std::string out;
  std::vector<char> buf(std::size_t{1} << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (out.size() + got > max_bytes) {
      detail::fail(path, ": file size must be at most ", max_bytes, " bytes");
    }
    out.append(buf.data(), got);
  }
  if (in.bad()) {
    detail::fail(path, ": read error");
  }
  return out;
}

}  // namespace pipesched
