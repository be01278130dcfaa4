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
/// on the stage (written only when chunks > 1); `placement` is "sequential", "loop", "v" or
/// {"kind": "custom", "table": [...]} (table[s*chunks + c] = global chunk). Communication ops
/// also carry "peer": the stage on the other side of the transfer.
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
  using r = detail::json_reader;
  r::object(j, "");
  const auto version = r::integer(r::required(j, "version", ""), "/version", 0,
                                  std::numeric_limits<std::uint32_t>::max());
  if (version != schedule_json_version) {
    r::fail_at("/version", "unsupported schedule format version " + std::to_string(version) +
                               " (this library reads version 1)");
  }
  std::string name;
  if (const auto* n = r::optional(j, "name")) {
    name = r::string(*n, "/name");
  }
  const auto p = static_cast<std::uint32_t>(
      r::integer(r::required(j, "stages", ""), "/stages", 1, max_stages));
  const auto m = static_cast<std::uint32_t>(
      r::integer(r::required(j, "microbatches", ""), "/microbatches", 1, max_microbatches));
  std::uint32_t v = 1;
  if (const auto* c = r::optional(j, "chunks")) {
    v = static_cast<std::uint32_t>(
        r::integer(*c, "/chunks", 1, std::numeric_limits<chunk_index>::max()));
  }
  if (std::uint64_t{p} * v > max_total_chunks) {
    r::fail_at("/chunks", "stages*chunks (" + std::to_string(std::uint64_t{p} * v) +
                              ") must be at most " + std::to_string(max_total_chunks));
  }
  placement pl = placement::loop(p, v);
  if (const auto* pj = r::optional(j, "placement")) {
    if (pj->is_string()) {
      const std::string k = pj->get<std::string>();
      if (k == "sequential") {
        if (v != 1) {
          r::fail_at("/placement", "\"sequential\" needs chunks = 1, not " + std::to_string(v));
        }
      } else if (k == "loop") {
        // the default
      } else if (k == "v") {
        if (v != 2) {
          r::fail_at("/placement", "\"v\" needs chunks = 2, not " + std::to_string(v));
        }
        pl = placement::v_shape(p);
      } else {
        r::fail_at("/placement", "unknown placement " + r::quote(k) +
                                     " (known: sequential, loop, v, or {\"kind\": \"custom\", "
                                     "\"table\": [...]})");
      }
    } else {
      r::object(*pj, "/placement");
      const std::string kind = r::string(r::required(*pj, "kind", "/placement"), "/placement/kind");
      if (kind != "custom") {
        r::fail_at("/placement/kind", "must be \"custom\" in object form, not " + r::quote(kind));
      }
      const auto& tj = r::array(r::required(*pj, "table", "/placement"), "/placement/table");
      std::vector<global_chunk> table;
      table.reserve(tj.size());
      for (std::size_t i = 0; i < tj.size(); ++i) {
        table.push_back(static_cast<global_chunk>(r::integer(
            tj[i], "/placement/table/" + std::to_string(i), 0, std::uint64_t{p} * v - 1)));
      }
      try {
        pl = placement::custom(p, v, std::move(table));
      } catch (const invalid_argument& e) {
        r::fail_at("/placement/table", e.what());
      }
    }
  }
  schedule out(std::move(name), m, std::move(pl));
  const auto& ops = r::array(r::required(j, "ops", ""), "/ops");
  if (ops.size() != p) {
    r::fail_at("/ops", "must hold one list per stage (stages=" + std::to_string(p) + "), not " +
                           std::to_string(ops.size()));
  }
  for (stage_index s = 0; s < p; ++s) {
    const std::string sp = "/ops/" + std::to_string(s);
    const auto& list = r::array(ops[s], sp);
    auto& dst = out.stage_ops(s);
    dst.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string path = sp + "/" + std::to_string(i);
      const auto& e = r::object(list[i], path);
      const std::string ks = r::string(r::required(e, "kind", path), path + "/kind");
      const auto kind = parse_op_kind(ks);
      if (!kind) {
        r::fail_at(path + "/kind", "unknown op kind " + r::quote(ks) +
                                       " (known: F B W BW SEND_F RECV_F SEND_B RECV_B)");
      }
      const auto mb =
          static_cast<microbatch_index>(r::integer(r::required(e, "mb", path), path + "/mb", 0,
                                                   std::numeric_limits<microbatch_index>::max()));
      chunk_index chunk = 0;
      if (const auto* c = r::optional(e, "chunk")) {
        chunk = static_cast<chunk_index>(
            r::integer(*c, path + "/chunk", 0, std::numeric_limits<chunk_index>::max()));
      }
      dst.push_back(make_op(*kind, mb, chunk));
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
