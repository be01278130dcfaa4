#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pipesched/ir/error.hpp"

// Strict, path-keeping JSON reading: every error names the JSON pointer of the offending
// value, e.g. `read_cost_model: /stages/2/forward: must be a number >= 0`.

namespace pipesched::detail {

/// A position in a JSON document: the value and its JSON pointer (RFC 6901).
class json_cursor {
 public:
  json_cursor(const nlohmann::json& v, std::string path, const char* who)
      : v_(&v), path_(std::move(path)), who_(who) {}

  const nlohmann::json& value() const noexcept { return *v_; }
  const std::string& path() const noexcept { return path_; }

  template <class... Args>
  [[noreturn]] void error(const Args&... rule) const {
    fail(who_, ": ", path_.empty() ? "/" : path_, ": ", rule...);
  }

  /// Requires an object whose keys are all in `allowed`.
  void expect_object(std::initializer_list<std::string_view> allowed) const {
    if (!v_->is_object()) {
      error("must be an object");
    }
    for (const auto& item : v_->items()) {
      bool ok = false;
      for (std::string_view a : allowed) {
        ok = ok || a == item.key();
      }
      if (!ok) {
        std::string list;
        for (std::string_view a : allowed) {
          list += list.empty() ? "" : ", ";
          list += a;
        }
        json_cursor(item.value(), path_ + "/" + escape(item.key()), who_)
            .error("unknown field (expected one of: ", list, ")");
      }
    }
  }
  /// Requires an array; returns its size.
  std::size_t expect_array() const {
    if (!v_->is_array()) {
      error("must be an array");
    }
    return v_->size();
  }
  bool has(const char* key) const { return v_->is_object() && v_->contains(key); }

  /// The member `key`, which must exist.
  json_cursor operator[](const char* key) const {
    if (!has(key)) {
      error("missing field \"", key, "\"");
    }
    return json_cursor(v_->at(key), path_ + "/" + escape(key), who_);
  }
  json_cursor operator[](std::size_t i) const {
    return json_cursor(v_->at(i), path_ + "/" + std::to_string(i), who_);
  }

  /// A finite number >= 0.
  double non_negative() const {
    if (!v_->is_number() || !std::isfinite(v_->get<double>()) || v_->get<double>() < 0.0) {
      error("must be a number >= 0");
    }
    return v_->get<double>();
  }
  /// A finite number.
  double number() const {
    if (!v_->is_number() || !std::isfinite(v_->get<double>())) {
      error("must be a finite number");
    }
    return v_->get<double>();
  }
  /// An integer in [lo, hi].
  std::uint64_t integer(std::uint64_t lo, std::uint64_t hi) const {
    if (!v_->is_number_integer() ||
        (v_->is_number_integer() && !v_->is_number_unsigned() && v_->get<std::int64_t>() < 0)) {
      error("must be an integer between ", lo, " and ", hi);
    }
    const auto x = v_->get<std::uint64_t>();
    if (x < lo || x > hi) {
      error("must be an integer between ", lo, " and ", hi);
    }
    return x;
  }
  std::string string() const {
    if (!v_->is_string()) {
      error("must be a string");
    }
    return v_->get<std::string>();
  }

  /// The optional member `key` as a number >= 0, or `fallback`.
  double non_negative_or(const char* key, double fallback) const {
    return has(key) ? (*this)[key].non_negative() : fallback;
  }
  /// Checks the mandatory "version" member against the supported one.
  void expect_version(std::uint64_t supported) const {
    const json_cursor c = (*this)["version"];
    if (!c.value().is_number_integer() || c.value().get<std::int64_t>() < 0 ||
        c.value().get<std::uint64_t>() != supported) {
      c.error("unsupported version ", c.value().dump(), " (expected ", supported, ")");
    }
  }

  static std::string escape(std::string_view key) {
    std::string out;
    for (char ch : key) {
      if (ch == '~') {
        out += "~0";
      } else if (ch == '/') {
        out += "~1";
      } else {
        out += ch;
      }
    }
    return out;
  }

 private:
  const nlohmann::json* v_;
  std::string path_;
  const char* who_;
};

/// Parses text, rethrowing nlohmann's parse errors as invalid_argument from `who`.
inline nlohmann::json parse_json(std::string_view text, const char* who) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    fail(who, ": invalid JSON: ", e.what());
  }
}

}  // namespace pipesched::detail
