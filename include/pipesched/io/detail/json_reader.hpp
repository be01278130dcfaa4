#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pipesched/ir/error.hpp"

namespace pipesched::detail {

/// Field-by-field JSON reading that keeps the JSON pointer path for error messages:
/// "/ops/2/5/kind: unknown op kind \"X\"". Shared by every io/ reader.
struct json_reader {
  [[noreturn]] static void fail_at(const std::string& path, std::string_view rule) {
    fail(path.empty() ? "/" : path, ": ", rule);
  }

  static std::string child(const std::string& path, std::string_view key) {
    return path + "/" + std::string(key);
  }
  static std::string child(const std::string& path, std::size_t index) {
    return path + "/" + std::to_string(index);
  }

  static const nlohmann::json& object(const nlohmann::json& j, const std::string& path) {
    if (!j.is_object()) {
      fail_at(path, std::string("must be an object, not ") + j.type_name());
    }
    return j;
  }
  static const nlohmann::json& array(const nlohmann::json& j, const std::string& path) {
    if (!j.is_array()) {
      fail_at(path, std::string("must be an array, not ") + j.type_name());
    }
    return j;
  }

  /// The member `key` of object `j`, or a "missing required key" error.
  static const nlohmann::json& required(const nlohmann::json& j,
                                        std::string_view key,
                                        const std::string& path) {
    auto it = j.find(key);
    if (it == j.end()) {
      fail_at(child(path, key), "missing required key");
    }
    return *it;
  }
  static const nlohmann::json* optional(const nlohmann::json& j, std::string_view key) {
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  }

  /// An integer in [lo, hi]. Rejects floats with a fraction, booleans, strings.
  static std::uint64_t integer(const nlohmann::json& j,
                               const std::string& path,
                               std::uint64_t lo,
                               std::uint64_t hi) {
    std::uint64_t v = 0;
    if (j.is_number_unsigned()) {
      v = j.get<std::uint64_t>();
    } else if (j.is_number_integer()) {
      const auto s = j.get<std::int64_t>();
      if (s < 0) {
        fail_at(path, "must be an integer >= " + std::to_string(lo) + ", not " + std::to_string(s));
      }
      v = static_cast<std::uint64_t>(s);
    } else if (j.is_number_float()) {
      const double d = j.get<double>();
      if (!std::isfinite(d) || d != std::floor(d) || d < 0.0 || d > 1.8e19) {
        fail_at(path, "must be an integer, not " + j.dump());
      }
      v = static_cast<std::uint64_t>(d);
    } else {
      fail_at(path, std::string("must be an integer, not ") + j.type_name());
    }
    if (v < lo || v > hi) {
      fail_at(path, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                        ", not " + std::to_string(v));
    }
    return v;
  }

  /// A finite number >= 0.
  static double non_negative(const nlohmann::json& j, const std::string& path) {
    if (!j.is_number()) {
      fail_at(path, std::string("must be a number >= 0, not ") + j.type_name());
    }
    const double d = j.get<double>();
    if (!std::isfinite(d) || d < 0.0) {
      fail_at(path, "must be a finite number >= 0, not " + j.dump());
    }
    return d;
  }

  static std::string string(const nlohmann::json& j, const std::string& path) {
    if (!j.is_string()) {
      fail_at(path, std::string("must be a string, not ") + j.type_name());
    }
    return j.get<std::string>();
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

  /// Parses text, turning nlohmann's parse errors into invalid_argument.
  static nlohmann::json parse(std::string_view text, std::string_view what) {
    try {
      return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
      // parse_error, and out_of_range for a number that overflows a double (1E400).
      fail(what, ": malformed JSON: ", e.what());
    }
  }
};

}  // namespace pipesched::detail
