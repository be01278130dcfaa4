// zb-auto / zb-v against the zero-bubble authors' own heuristics, on their reference settings
// (a JSON file of rows with p, m, costs, memory, limit and the authors' span / bubble rate;
// tests/data/zb_reference.json holds 124 of them).
//
//   zb_reference FILE [--search-evaluations N] [--rows]
//
// For every row it runs our search (default options, or the given local-search budget) and
// prints a markdown summary: rows better / same / worse than the authors, mean bubble rate
// ours vs theirs, rows where the lower bound proves the authors' schedule optimal, and the
// total search time. --rows also prints one line per row. Exit code 1 if any row is worse.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <pipesched/gen/zb_auto.hpp>
#include <pipesched/gen/zb_v.hpp>

using namespace pipesched;

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: zb_reference FILE [--search-evaluations N] [--rows]\n");
    return 2;
  }
  zb_auto_options opts;
  bool per_row = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows") {
      per_row = true;
    } else if (a == "--search-evaluations" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0') {
        std::fprintf(stderr, "error: --search-evaluations needs a count, got \"%s\"\n", argv[i]);
        return 2;
      }
      opts.search_evaluations = std::size_t(n);
    } else {
      std::fprintf(stderr, "error: unknown argument \"%s\"\n", a.c_str());
      return 2;
    }
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "error: cannot open %s\n", argv[1]);
    return 2;
  }
  const nlohmann::json doc = nlohmann::json::parse(in);
  int better = 0, same = 0, worse = 0, proven = 0, n = 0;
  double ours_sum = 0.0, theirs_sum = 0.0, ms_sum = 0.0;
  for (const auto& r : doc.at("rows")) {
    const std::string kind = r.at("schedule").get<std::string>();
    const bool v = kind == "zb-v";
    const auto& c = r.at(v ? "chunk_costs" : "costs");
    const auto& mem = r.at(v ? "chunk_memory" : "memory");
    generator_params gp;
    gp.stages = r.at("p").get<std::uint32_t>();
    gp.microbatches = r.at("m").get<std::uint32_t>();
    // The API takes a stage's whole slice (split over its v chunks): a zb-v row's per-chunk
    // values are doubled, exactly, and split back to the authors' numbers.
    const double k = v ? 2.0 : 1.0;
    gp.costs = cost_model::uniform(k * c.at("F").get<double>(), k * c.at("B").get<double>(),
                                   k * c.at("W").get<double>(), c.at("comm").get<double>());
    gp.memory = memory_model::uniform(k * mem.at("activation").get<double>(),
                                      k * mem.at("weight_grad_input").get<double>());
    gp.memory_limit = r.at("memory_limit").get<double>();
    const auto t0 = std::chrono::steady_clock::now();
    const zb_auto_result res = v ? zb_v_search(gp, opts) : zb_auto_search(gp, opts);
    const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
    ms_sum += dt.count();
    const auto& a = r.at("authors");
    const double theirs = a.at("bubble_rate").get<double>();
    const double ours = res.bubble_rate();
    // zb-auto rows carry the authors' integer span: compare spans exactly. zb-v rows carry a
    // bubble rate printed to 4 decimals: compare with half a unit of the last digit.
    int cmp = 0;
    if (a.contains("span")) {
      const double span = a.at("span").get<double>();
      cmp = res.span < span ? -1 : (res.span > span ? 1 : 0);
      proven += res.lower_bound >= span ? 1 : 0;
    } else {
      cmp = ours < theirs - 5e-5 ? -1 : (ours > theirs + 5e-5 ? 1 : 0);
    }
    (cmp < 0 ? better : cmp > 0 ? worse : same) += 1;
    ours_sum += ours;
    theirs_sum += theirs;
    ++n;
    if (per_row) {
      std::printf("%3d %-7s p=%-2u m=%-3u limit %-4g authors %.4f ours %.4f bound %.4f %s\n", n - 1,
                  kind.c_str(), gp.stages, gp.microbatches, gp.memory_limit.at(0), theirs, ours,
                  res.lower_bound > 0 ? (res.lower_bound - res.ideal) / res.lower_bound : 0.0,
                  cmp < 0   ? "better"
                  : cmp > 0 ? "WORSE"
                            : "same");
    }
  }
  std::printf(
      "| rows | better | same | worse | mean bubble (authors) | mean bubble (ours) | "
      "authors proven optimal | search time |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  std::printf("| %d | %d | %d | %d | %.3f %% | %.3f %% | %d | %.0f ms |\n", n, better, same, worse,
              100.0 * theirs_sum / n, 100.0 * ours_sum / n, proven, ms_sum);
  return worse > 0 ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
