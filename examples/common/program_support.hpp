#pragma once

// What the plain programs (examples/, bench/scale_cluster) share: reading a count from the
// command line, and the process's CPU time and peak memory for their measurements.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sys/resource.h>

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
