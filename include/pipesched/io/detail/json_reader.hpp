#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"

namespace pipesched::detail {

/// A JSON value and its JSON pointer, read field by field: every error names the pointer,
/// "/ops/2/5/kind: unknown op kind \"X\"". The one reader of every io/ JSON format (schedule,
/// cost model, memory model, simulation result), so a type or range rule reads the same in
/// all of them. Holds a reference: the json must outlive the reader.
struct json_reader {
  const nlohmann::json& v;
  std::string path;  ///< "" for the document itself, shown as "/"

  /// Throws invalid_argument "<path>: <rule...>".
  template <class... Args>
  [[noreturn]] void error(const Args&... rule) const {
    fail(path.empty() ? std::string_view("/") : std::string_view(path), ": ", rule...);
  }

  bool has(std::string_view key) const { return v.is_object() && v.contains(key); }
  /// The member `key`, or a "missing required key" error at its path.
  json_reader operator[](std::string_view key) const {
    std::string p = child(key);
    const auto it = v.find(key);
    if (it == v.end()) {
      json_reader{v, std::move(p)}.error("missing required key");
    }
    return {*it, std::move(p)};
  }
  /// Element `i` of an array (after array()).
  json_reader operator[](std::size_t i) const { return {v.at(i), child(std::to_string(i))}; }

  /// Checks that the value is an object; other keys are allowed (the schedule format ignores
  /// them, so newer writers can add fields).
  const json_reader& object() const {
    if (!v.is_object()) {
      error("must be an object, not ", v.type_name());
    }
    return *this;
  }
  /// Checks that the value is an object with no key outside `allowed`: the model files are
  /// small and hand-written, so a typo like "fwd" must not silently fall back to a default.
  const json_reader& object(std::initializer_list<std::string_view> allowed) const {
    object();
    for (const auto& item : v.items()) {
      if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
        std::string list;
        for (std::string_view a : allowed) {
          list += list.empty() ? "" : ", ";
          list += a;
        }
        (*this)[item.key()].error("unknown key (expected one of: ", list, ")");
      }
    }
    return *this;
  }
  /// Checks that the value is an array; returns its size.
  std::size_t array() const {
    if (!v.is_array()) {
      error("must be an array, not ", v.type_name());
    }
    return v.size();
  }

  /// An integer in [lo, hi]. Rejects floats with a fraction, booleans, strings.
  std::uint64_t integer(std::uint64_t lo, std::uint64_t hi) const {
    std::uint64_t n = 0;
    if (v.is_number_unsigned()) {
      n = v.get<std::uint64_t>();
    } else if (v.is_number_integer()) {
      const auto s = v.get<std::int64_t>();
      if (s < 0) {
        error("must be an integer >= ", std::to_string(lo), ", not ", std::to_string(s));
      }
      n = static_cast<std::uint64_t>(s);
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!std::isfinite(d) || d != std::floor(d) || d < 0.0 || d > 1.8e19) {
        error("must be an integer, not ", v.dump());
      }
      n = static_cast<std::uint64_t>(d);
    } else {
      error("must be an integer, not ", v.type_name());
    }
    if (n < lo || n > hi) {
      error("must be between ", std::to_string(lo), " and ", std::to_string(hi), ", not ",
            std::to_string(n));
    }
    return n;
  }
  /// A finite number >= 0.
  double non_negative() const {
    if (!v.is_number()) {
      error("must be a number >= 0, not ", v.type_name());
    }
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0.0) {
      error("must be a finite number >= 0, not ", v.dump());
    }
    return d;
  }
  /// The member `key` as non_negative(), or `fallback` when absent.
  double non_negative_or(std::string_view key, double fallback) const {
    return has(key) ? (*this)[key].non_negative() : fallback;
  }
  /// Any finite number.
  double number() const {
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      error("must be a finite number, not ", v.dump());
    }
    return v.get<double>();
  }
  std::string string() const {
    if (!v.is_string()) {
      error("must be a string, not ", v.type_name());
    }
    return v.get<std::string>();
  }
  /// A name the reports print (a model's, a cluster's, a schedule's): a string without
  /// control characters, which would reach the terminal raw (an escape sequence in a name
  /// recolours or rewrites the report).
  std::string name() const {
    std::string s = string();
    for (const char ch : s) {
      const auto u = static_cast<unsigned char>(ch);
      if (u < 0x20 || u == 0x7f) {
        error("must hold no control characters (it is printed in reports), not ", quote(s));
      }
    }
    return s;
  }
  /// An op kind by name; `known` is appended to the error (the schedule format lists them).
  op_kind kind(std::string_view known = "") const {
    const std::string k = string();
    const auto parsed = parse_op_kind(k);
    if (!parsed) {
      error("unknown op kind ", quote(k), known);
    }
    return *parsed;
  }
  /// The member "version", which must equal `supported`; `what` names the format in the error.
  void version(std::uint64_t supported, std::string_view what) const {
    const json_reader c = (*this)["version"];
    const auto got = c.integer(0, std::numeric_limits<std::uint32_t>::max());
    if (got != supported) {
      c.error("unsupported ", what, " format version ", got, " (this library reads version ",
              supported, ")");
    }
  }

  /// `s` as a JSON string literal for an error message: quoted, control characters escaped
  /// (the message stays one line), cut to about 60 characters.
  static std::string quote(const std::string& s) {
    constexpr std::size_t keep = 60;
    std::string out = nlohmann::json(s.size() > keep ? s.substr(0, keep) : s)
                          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() > keep) {
      out.insert(out.size() - 1, "...");
    }
    return out;
  }

  // One allocation per path: a schedule file has a few paths per op.
  std::string child(std::string_view key) const {
    std::string p;
    p.reserve(path.size() + 1 + key.size());
    p.append(path).append(1, '/').append(key);
    return p;
  }

  /// Parses text, turning nlohmann's parse errors into invalid_argument "<what>: malformed
  /// JSON: ...". A key given twice in one object is refused, naming its pointer: nlohmann
  /// keeps the last, so a file's earlier value would be dropped without a word.
  static nlohmann::json parse(std::string_view text, std::string_view what) {
    duplicate_keys seen;
    try {
      return nlohmann::json::parse(
          text.begin(), text.end(),
          [&seen](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
            return seen.on(event, parsed);
          });
    } catch (const nlohmann::json::exception& e) {
      // parse_error, and out_of_range for a number that overflows a double (1E400).
      fail(what, ": malformed JSON: ", e.what());
    } catch (const duplicate_keys::found& d) {
      fail(what, ": ", d.pointer, ": the key is given twice (each key once per object)");
    }
  }

 private:
  // Where the parser is (one frame per open object or array) and each open object's keys.
  struct duplicate_keys {
    struct found {
      std::string pointer;
    };
    struct frame {
      bool array = false;
      std::size_t index = 0;  // arrays: the element being read
      std::string key;        // objects: the member being read
      std::vector<std::string> keys;
    };
    std::vector<frame> open;
    std::size_t depth = 0;  // frames in use (open keeps its capacity)

    static void escape(std::string& out, std::string_view token) {
      for (const char c : token) {
        out += c == '~'   ? std::string_view("~0")
               : c == '/' ? std::string_view("~1")
                          : std::string_view(&c, 1);
      }
    }
    void ended_value() {
      if (depth > 0 && open[depth - 1].array) {
        ++open[depth - 1].index;
      }
    }
    bool on(nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
      using ev = nlohmann::json::parse_event_t;
      switch (event) {
        case ev::object_start:
        case ev::array_start: {
          if (open.size() == depth) {
            open.emplace_back();
          }
          frame& f = open[depth++];
          f.array = event == ev::array_start;
          f.index = 0;
          f.keys.clear();
          break;
        }
        case ev::key: {
          frame& f = open[depth - 1];
          const auto& k = parsed.get_ref<const std::string&>();
          // Objects of these formats hold a few keys; past that a sorted search keeps a
          // hostile file with many keys linear-logarithmic.
          auto at = f.keys.size() <= 16 ? std::find(f.keys.begin(), f.keys.end(), k)
                                        : std::lower_bound(f.keys.begin(), f.keys.end(), k);
          if (at != f.keys.end() && *at == k) {
            std::string pointer;
            for (std::size_t i = 0; i + 1 < depth; ++i) {
              pointer += '/';
              if (open[i].array) {
                pointer += std::to_string(open[i].index);
              } else {
                escape(pointer, open[i].key);
              }
            }
            pointer += '/';
            escape(pointer, k);
            throw found{std::move(pointer)};
          }
          if (f.keys.size() < 16) {
            f.keys.push_back(k);
          } else {
            if (f.keys.size() == 16) {
              std::sort(f.keys.begin(), f.keys.end());
            }
            f.keys.insert(std::lower_bound(f.keys.begin(), f.keys.end(), k), k);
          }
          f.key = k;
          break;
        }
        case ev::object_end:
        case ev::array_end:
          --depth;
          ended_value();
          break;
        case ev::value:
          ended_value();
          break;
      }
      return true;
    }
  };
};

/// A per-(stage, chunk) table `[[x, x], [x, x]]`: one inner array per stage, all of the same
/// non-zero length. Returns the chunk count and the entries read by `read(json_reader)`,
/// flattened (index s*chunks + c). Shared by the cost and memory model formats.
template <class Read>
auto read_per_chunk(const json_reader& c, Read&& read) {
  using T = decltype(read(c));
  std::vector<T> flat;
  std::uint32_t chunks = 0;
  const std::size_t n = c.array();
  if (n == 0) {
    c.error("must not be empty");
  }
  for (std::size_t s = 0; s < n; ++s) {
    const json_reader row = c[s];
    const std::size_t k = row.array();
    if (s == 0) {
      if (k == 0 || k > std::numeric_limits<chunk_index>::max()) {
        row.error("must hold between 1 and ", std::numeric_limits<chunk_index>::max(), " chunks");
      }
      chunks = static_cast<std::uint32_t>(k);
    } else if (k != chunks) {
      row.error("must hold ", chunks, " chunks, like ", c.path, "/0");
    }
    for (std::size_t i = 0; i < k; ++i) {
      flat.push_back(read(row[i]));
    }
  }
  return std::pair{chunks, std::move(flat)};
}

/// A per-micro-batch factor table (docs/formats.md, "microbatches"): one entry per micro-batch,
/// each a factor (`read_factor`: a number, every field that value, or an object) for every
/// stage and chunk, an array of p factors (per stage), or an array of p arrays of v factors (per
/// (stage, chunk)); every entry of the same form and size as the first. Returns (stages, chunks,
/// entries flattened (mb·stages + s)·chunks + c). Shared by the cost and memory model formats.
template <class ReadFactor>
auto read_microbatch_table(const json_reader& c, ReadFactor&& read_factor) {
  using T = decltype(read_factor(c));
  std::vector<T> flat;
  const std::size_t n = c.array();
  if (n == 0) {
    c.error("must not be empty (one entry per micro-batch)");
  }
  if (n > max_microbatches) {
    c.error("must hold at most ", max_microbatches, " entries (one per micro-batch)");
  }
  // The form of entry 0: stages (0: a single factor) and chunks (0: factors, not arrays).
  std::size_t stages = 0;
  std::size_t chunks = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const json_reader e = c[j];
    std::size_t es = 0;
    std::size_t ec = 0;
    if (e.v.is_array()) {
      es = e.array();
      if (es == 0) {
        e.error("must not be empty (one factor per stage)");
      }
      ec = e[0].v.is_array() ? e[0].array() : 0;
    }
    if (j == 0) {
      stages = es;
      chunks = ec;
    } else if (es != stages || ec != chunks) {
      const auto form = [](std::size_t ns, std::size_t nc) {
        return ns == 0 ? std::string("one factor")
               : nc == 0
                   ? std::to_string(ns) + (ns == 1 ? " factor" : " factors") + ", one per stage"
                   : std::to_string(ns) + " x " + std::to_string(nc) +
                         " factors, per stage and chunk";
      };
      e.error("must have the form of ", c.path, "/0 (", form(stages, chunks), "), not ",
              form(es, ec));
    }
    if (es == 0) {
      flat.push_back(read_factor(e));
      continue;
    }
    for (std::size_t s = 0; s < es; ++s) {
      const json_reader row = e[s];
      if (ec == 0) {
        if (row.v.is_array()) {
          row.error("must be a factor (a number or an object), like ", e.path, "/0");
        }
        flat.push_back(read_factor(row));
        continue;
      }
      if (row.array() != ec) {
        row.error("must hold ", ec, " chunks, like ", e.path, "/0");
      }
      for (std::size_t k = 0; k < ec; ++k) {
        flat.push_back(read_factor(row[k]));
      }
    }
  }
  return std::tuple{static_cast<std::uint32_t>(std::max<std::size_t>(stages, 1)),
                    static_cast<std::uint32_t>(std::max<std::size_t>(chunks, 1)), std::move(flat)};
}

/// The "microbatches" table as JSON, in the form read_microbatch_table reads: per micro-batch
/// a factor (`factor_json`), an array per stage, or an array of arrays per (stage, chunk).
template <class T, class FactorJson>
nlohmann::json microbatch_table_json(std::uint32_t stages,
                                     std::uint32_t chunks,
                                     const std::vector<T>& values,
                                     FactorJson&& factor_json) {
  nlohmann::json out = nlohmann::json::array();
  const std::size_t row = std::size_t{stages} * chunks;
  for (std::size_t at = 0; at < values.size(); at += row) {
    if (stages == 1 && chunks == 1) {
      out.push_back(factor_json(values[at]));
      continue;
    }
    nlohmann::json e = nlohmann::json::array();
    for (std::size_t s = 0; s < stages; ++s) {
      if (chunks == 1) {
        e.push_back(factor_json(values[at + s]));
        continue;
      }
      nlohmann::json r = nlohmann::json::array();
      for (std::size_t k = 0; k < chunks; ++k) {
        r.push_back(factor_json(values[at + s * chunks + k]));
      }
      e.push_back(std::move(r));
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace pipesched::detail
