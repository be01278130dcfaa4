#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace pipesched::detail {

/// Text sink of the streaming writer: a fixed buffer flushed to the stream when full, so the
/// writer's memory does not grow with the trace.
class trace_sink {
 public:
  explicit trace_sink(std::ostream& os) : os_(os) {}
  trace_sink(const trace_sink&) = delete;
  trace_sink& operator=(const trace_sink&) = delete;
  ~trace_sink() = default;

  void raw(std::string_view text) {
    buf_.append(text.data(), text.data() + text.size());
    if (buf_.size() >= flush_at) {
      flush();
    }
  }
  void flush() {
    os_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }
  /// A JSON string. Plain ASCII (every name the writer makes) is copied with the escapes
  /// nlohmann uses; anything else (a user's schedule name) goes through nlohmann, which also
  /// rejects invalid UTF-8 as chrome_trace_json always did.
  void string(std::string_view text) {
    bool ascii = true;
    for (const char c : text) {
      ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    }
    if (!ascii) {
      raw(nlohmann::json(std::string(text)).dump());
      return;
    }
    buf_.push_back('"');
    for (const char c : text) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        buf_.push_back('\\');
        buf_.push_back(c);
      } else if (u < 0x20) {
        switch (c) {
          case '\b':
            raw("\\b");
            break;
          case '\f':
            raw("\\f");
            break;
          case '\n':
            raw("\\n");
            break;
          case '\r':
            raw("\\r");
            break;
          case '\t':
            raw("\\t");
            break;
          default:
            fmt::format_to(std::back_inserter(buf_), "\\u{:04x}", unsigned{u});
        }
      } else {
        buf_.push_back(c);
      }
    }
    buf_.push_back('"');
  }
  /// An unsigned integer.
  void number(std::uint64_t x) { fmt::format_to(std::back_inserter(buf_), "{}", x); }
  /// A double as nlohmann writes it: the shortest text that reads back the same value, with
  /// ".0" on integral values, exponent form from 1e15 up and below 1e-4, and null when not
  /// finite. (Which of two equally short digit strings is chosen may differ; the value read
  /// back never does.)
  void number(double x) {
    if (!std::isfinite(x)) {
      raw("null");
      return;
    }
    char text[64];
    const auto end = fmt::format_to_n(text, sizeof text, "{}", x).out;
    const std::string_view t(text, static_cast<std::size_t>(end - text));
    if (t.find('e') != std::string_view::npos) {
      raw(t);
      return;
    }
    const std::size_t sign = t[0] == '-' ? 1 : 0;
    const std::size_t dot = std::min(t.find('.'), t.size());
    if (dot - sign <= 15) {
      raw(t);
      if (dot == t.size()) {
        raw(".0");
      }
      return;
    }
    // 16 integer digits: fmt keeps fixed notation up to 1e16, nlohmann only up to 1e15.
    std::string digits(t.substr(sign, dot - sign));
    if (dot < t.size()) {
      digits += t.substr(dot + 1);
    }
    while (digits.size() > 1 && digits.back() == '0') {
      digits.pop_back();
    }
    raw(t.substr(0, sign));
    raw(std::string_view(digits).substr(0, 1));
    if (digits.size() > 1) {
      raw(".");
      raw(std::string_view(digits).substr(1));
    }
    fmt::format_to(std::back_inserter(buf_), "e+{:02}", dot - sign - 1);
  }
  /// `"key":`
  void key(std::string_view k) {
    buf_.push_back('"');
    raw(k);
    raw("\":");
  }
  /// `"key":value` (a number or a string), then `,` unless it is the object's last member.
  template <class T>
  void member(std::string_view k, const T& value, bool last = false) {
    key(k);
    if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      string(value);
    } else {
      number(value);
    }
    if (!last) {
      raw(",");
    }
  }

 private:
  static constexpr std::size_t flush_at = std::size_t{1} << 16;
  std::ostream& os_;
  fmt::memory_buffer buf_;
};

}  // namespace pipesched::detail
