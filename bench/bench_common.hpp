#pragma once
// Shared by the bench_<area>.cpp programs: the sizes, the schedule list (every entry of
// pipesched::default_registry(), so new generators are benchmarked without edits) and the
// dynamic registration of one benchmark family per (phase, schedule).
//
// Sizes: p = 4, m = 8 up to p = 64, m = 1024 by default, so each program finishes in well
// under a minute. PIPESCHED_BENCH_LARGE=1 adds p = 128..1024 and m = 2048..16384 (up to about
// 50 million ops: several seconds per iteration and a few GB of memory).

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/ir/schedule.hpp>

namespace pipesched_bench {

using namespace pipesched;

inline bool large_sizes() {
  const char* v = std::getenv("PIPESCHED_BENCH_LARGE");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

/// (p, m) pairs, growing together so the complexity fit sees a wide range of op counts.
inline std::vector<std::pair<std::int64_t, std::int64_t>> sizes() {
  std::vector<std::pair<std::int64_t, std::int64_t>> out = {
      {4, 8}, {8, 32}, {16, 128}, {32, 256}, {64, 1024}};
  if (large_sizes()) {
    out.insert(out.end(), {{128, 2048}, {256, 4096}, {512, 8192}, {1024, 16384}});
  }
  return out;
}

/// Generator parameters for size (p, m): shape only; cost-aware generators get unit costs
/// and their default memory limit.
inline generator_params params(const generator_entry&, std::int64_t p, std::int64_t m) {
  generator_params gp;
  gp.stages = static_cast<std::uint32_t>(p);
  gp.microbatches = static_cast<std::uint32_t>(m);
  return gp;
}

/// The schedule for (entry, p, m), generated once per process and kept for the next size's
/// benchmarks only (one schedule of 50M ops is 400 MB: never keep two).
inline const schedule* cached(const generator_entry& e, std::int64_t p, std::int64_t m) {
  static std::string key;
  static std::unique_ptr<schedule> value;
  const std::string k = e.name + "/" + std::to_string(p) + "/" + std::to_string(m);
  if (k != key) {
    value.reset();
    key.clear();
    try {
      value = std::make_unique<schedule>(e.generate(params(e, p, m)));
    } catch (const std::exception&) {
      return nullptr;  // the generator doesn't serve this size (e.g. too large a search)
    }
    key = k;
  }
  return value.get();
}

/// Generation of the cost-aware searches grows faster than linear; they stop at this size.
inline bool is_search(const generator_entry& e) {
  return e.name.rfind("zb-auto", 0) == 0 || e.name == "zb-1p" || e.name == "zb-2p" ||
         e.name == "zb-v";
}

/// Registers `phase/<schedule>` for every registered schedule and every size, with the
/// complexity fit over the op count. `body(state, entry, schedule)` runs the timed loop.
template <class Body>
void register_all(const std::string& phase, Body body, double min_time = 0.1) {
  for (const generator_entry& e : default_registry().entries()) {
    const generator_entry* entry = &e;
    auto* b = benchmark::RegisterBenchmark(
        (phase + "/" + e.name).c_str(), [entry, body](benchmark::State& st) {
          const schedule* s = cached(*entry, st.range(0), st.range(1));
          if (s == nullptr) {
            st.SkipWithError("generator does not serve this size");
            return;
          }
          body(st, *entry, *s);
          const auto n = static_cast<std::int64_t>(s->size());
          st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations()) * n);
          st.SetComplexityN(n);
          // Seconds per op (printed with an SI prefix, e.g. "12.3n" = 12.3 ns per op).
          st.counters["t_per_op"] =
              benchmark::Counter(static_cast<double>(n) * static_cast<double>(st.iterations()),
                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
        });
    for (const auto& [p, m] : sizes()) {
      if (is_search(e) && std::int64_t{p} * m > 64 * 1024) {
        continue;
      }
      b->Args({p, m});
    }
    b->ArgNames({"p", "m"})
        ->Complexity(benchmark::oN)
        ->MinTime(min_time)
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace pipesched_bench
