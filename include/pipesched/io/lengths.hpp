#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"

// The sequence lengths file of `pipesched pack` (docs/formats.md, "Sequence lengths"): one whole
// number of tokens per line, the sequences of one global batch in their order.

namespace pipesched {

/// Sequence lengths as read from a file, with the line each came from (for messages).
struct sequence_lengths {
  std::vector<std::uint64_t> lengths;  ///< tokens of each sequence, in file order
  std::vector<std::size_t> lines;      ///< 1-based line of each length
};

/// The largest length read: 2^31 tokens (the squares stay exact in a double up to 2^53 for
/// sums of a few thousand such sequences; no real sequence comes near).
inline constexpr std::uint64_t max_sequence_length = std::uint64_t{1} << 31;

/// Reads one length per line: a whole number of tokens, at least 1, with optional spaces or tabs
/// around it; a line that is empty (or only spaces) or starts with `#` is skipped; line ends may
/// be \n or \r\n; a UTF-8 byte-order mark at the start is skipped. Throws invalid_argument "<name>
/// line N: <rule>" for anything else (a sign, a fraction, a letter, 0, a value above
/// max_sequence_length), and "<name>: no sequence lengths" for a file without any.
inline sequence_lengths read_lengths(std::string_view text, std::string_view name = "lengths") {
  sequence_lengths out;
  std::size_t line = 0;
  std::size_t pos = 0;
  // A UTF-8 byte-order mark (editors on Windows write one) is no part of the first line, as
  // for the JSON readers.
  if (text.starts_with("\xef\xbb\xbf")) {
    pos = 3;
  }
  while (pos < text.size()) {
    ++line;
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ' || l.back() == '\t')) {
      l.remove_suffix(1);
    }
    while (!l.empty() && (l.front() == ' ' || l.front() == '\t')) {
      l.remove_prefix(1);
    }
    if (l.empty() || l.front() == '#') {
      continue;
    }
    // At most 40 bytes, control and non-ASCII bytes as \xNN: an error message must not drive
    // the terminal or hide what is there (a length is ASCII digits).
    std::string shown;
    for (char c : l.substr(0, 40)) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) {
        constexpr const char* hex = "0123456789abcdef";
        shown += "\\x";
        shown += hex[u >> 4];
        shown += hex[u & 15];
      } else {
        shown += c;
      }
    }
    std::uint64_t n = 0;
    bool digits = true;
    bool too_large = false;
    for (char c : l) {
      if (c < '0' || c > '9') {
        digits = false;
        break;
      }
      n = n * 10 + static_cast<std::uint64_t>(c - '0');
      too_large = too_large || n > max_sequence_length;
      if (too_large) {
        n = max_sequence_length + 1;  // no wrap-around on long digit strings
      }
    }
    if (!digits) {
      if (l.front() == '-' && l.size() > 1 && l.find_first_not_of("0123456789", 1) == l.npos) {
        detail::fail(name, " line ", line, ": ", shown,
                     " tokens: a sequence length must be at least 1");
      }
      detail::fail(name, " line ", line, ": \"", shown,
                   "\" is not a whole number of tokens (one length per line)");
    }
    if (n == 0) {
      detail::fail(name, " line ", line, ": 0 tokens: a sequence length must be at least 1");
    }
    if (too_large) {
      detail::fail(name, " line ", line, ": ", shown, " tokens: a sequence length must be at most ",
                   max_sequence_length);
    }
    out.lengths.push_back(n);
    out.lines.push_back(line);
  }
  if (out.lengths.empty()) {
    detail::fail(name, ": no sequence lengths (one whole number of tokens per line)");
  }
  return out;
}

}  // namespace pipesched
