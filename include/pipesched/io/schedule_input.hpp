#pragma once

#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pipesched/io/json.hpp"
#include "pipesched/io/torch_csv.hpp"
#include "pipesched/ir/schedule.hpp"

// Reading a schedule whatever its format: pipesched JSON or PyTorch pipelining CSV, chosen by
// the caller or recognised by content (never by file name, which a pipe or a temp file lacks).

namespace pipesched {

/// The schedule formats read_schedule() reads.
enum class input_format {
  automatic,  ///< by content: detect_input_format()
  json,       ///< schedule JSON v1 (read_schedule_json)
  torch_csv,  ///< PyTorch pipelining CSV (from_torch_csv)
};

/// "auto", "json", "torch-csv".
constexpr std::string_view to_string(input_format f) noexcept {
  switch (f) {
    case input_format::json:
      return "json";
    case input_format::torch_csv:
      return "torch-csv";
    case input_format::automatic:
      break;
  }
  return "auto";
}

/// A concrete format by name, "json" or "torch-csv"; nullopt otherwise. `automatic` has no
/// spelling: it is what a caller uses when no name is given.
constexpr std::optional<input_format> parse_input_format(std::string_view s) noexcept {
  if (s == "json") {
    return input_format::json;
  }
  if (s == "torch-csv") {
    return input_format::torch_csv;
  }
  return std::nullopt;
}

/// The format of a schedule file's text: torch_csv when its first character after white space
/// is a digit or a comma (every CSV row starts with a cell `<stage><kind><mb>` or an idle
/// step), else json, so empty or binary text is reported as malformed JSON.
inline input_format detect_input_format(std::string_view text) noexcept {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return input_format::json;
  }
  const auto c = static_cast<unsigned char>(text[first]);
  return std::isdigit(c) != 0 || c == ',' ? input_format::torch_csv : input_format::json;
}

/// Reads a schedule in format `format` (automatic: detect_input_format(text)). `csv_name`
/// names a CSV schedule, which carries no name of its own; a JSON schedule keeps its "name".
/// Errors are the reader's own invalid_argument (read_schedule_json, from_torch_csv).
inline schedule read_schedule(std::string_view text,
                              input_format format = input_format::automatic,
                              std::string csv_name = "torch-csv") {
  if (format == input_format::automatic) {
    format = detect_input_format(text);
  }
  if (format == input_format::json) {
    return read_schedule_json(text);
  }
  return from_torch_csv(text, std::move(csv_name));
}

}  // namespace pipesched
