#pragma once

// What the plain programs (examples/, bench/scale_cluster) share: reading counts and names from
// the command line, and the process's CPU time and peak memory for their measurements.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <string>
#include <string_view>
#include <sys/resource.h>
#include <vector>

namespace program_support {

/// The whole number `text` given for `flag`, between `lo` and `hi`; otherwise says so on stderr,
/// naming `program`, and exits 2 (a usage error, as the CLI's).
inline std::uint32_t parse_count(const char* program,
                                 const char* flag,
                                 const char* text,
                                 unsigned long lo = 1,
                                 unsigned long hi = 0xffffffffUL) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "%s: %s needs a whole number from %lu to %lu, got \"%s\"\n", program, flag,
                 lo, hi, text);
    std::exit(2);
  }
  return static_cast<std::uint32_t>(v);
}

/// One `--flag N` (or its short `alias`) of a program: a whole number from `lo` to `hi`.
/// `given`, when set, records that the flag was on the command line.
struct count_flag {
  const char* name;
  const char* alias;
  std::uint32_t* value;
  unsigned long lo = 1;
  unsigned long hi = 0xffffffffUL;
  bool* given = nullptr;
};

/// Where a program's names (schedules) come from: nowhere, a repeated `--flag NAME` (with
/// `alias`), or the bare words of the command line.
struct name_list {
  std::vector<std::string>* names = nullptr;
  const char* flag = nullptr;  ///< nullptr: bare words
  const char* alias = nullptr;
};

/// Reads argv against `counts` and `list`; anything else prints `usage` on stderr and exits 2
/// (a usage error, as the CLI's).
inline void parse_args(const char* program,
                       int argc,
                       char** argv,
                       std::initializer_list<count_flag> counts,
                       const char* usage,
                       name_list list = {}) {
  const auto is = [](std::string_view a, const char* name, const char* alias) {
    return (name != nullptr && a == name) || (alias != nullptr && a == alias);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const count_flag* hit = nullptr;
    for (const count_flag& f : counts) {
      if (is(a, f.name, f.alias)) {
        hit = &f;
      }
    }
    if (hit != nullptr && i + 1 < argc) {
      *hit->value = parse_count(program, hit->name, argv[++i], hit->lo, hit->hi);
      if (hit->given != nullptr) {
        *hit->given = true;
      }
    } else if (list.names != nullptr && list.flag != nullptr && is(a, list.flag, list.alias) &&
               i + 1 < argc) {
      list.names->emplace_back(argv[++i]);
    } else if (hit == nullptr && list.names != nullptr && list.flag == nullptr &&
               !(!a.empty() && a[0] == '-')) {
      list.names->emplace_back(a);
    } else {
      std::fprintf(stderr, "usage: %s\n", usage);
      std::exit(2);
    }
  }
}

/// The process's peak resident memory so far, in MB (getrusage; Linux reports KiB).
inline double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

/// CPU time of the whole process (every thread), in seconds.
inline double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Wall-clock and CPU time since construction.
struct timer {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  double cpu = cpu_seconds();
  double wall_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  }
  double cpu_s() const { return cpu_seconds() - cpu; }
};

}  // namespace program_support
