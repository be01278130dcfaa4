// Schedule quality side by side: for GPT-like settings (transformer_costs), the bubble rate,
// makespan, gap to a lower bound and peak activation memory of every registered schedule, as
// markdown tables.
//
//   quality_table                       p = 4, 8, 16 and m = 2p, 4p, 8p (the docs' table)
//   quality_table --stages 4 --microbatches 8 [--layers 32] [--comm 0.05]
//   quality_table --recompute [--stages 4 --microbatches 8]
//       every schedule with every chunk recomputed (with_recompute), R just before its
//       backward against R in the earliest idle slot within the before-backward peak
//
// Model: h = 4096, a = 32, s = 2048, b = 1, `layers` transformer layers split evenly over the
// p·v chunks. Time unit: the forward of one layer (so T_F = layers per chunk, T_B ≈ 1.08·T_F,
// T_W ≈ 0.92·T_F); memory unit: M_B of one layer. Cost-aware generators get the same cost and
// memory models through generator_params.
//
// Lower bound (LB) on the makespan of any schedule on the row's placement and costs:
//   LB = max over stages s of ( start_s + busy_s ),
//   busy_s  = m · Σ_chunks on s (T_F + T_B + T_W)           (the stage's own work), and
//   start_s = the forward path to the stage's first chunk: Σ T_F of every earlier chunk plus
//             T_comm per stage change                          (the unavoidable pipeline fill).
// It ignores memory limits, so it bounds every schedule in the table; "gap" = makespan / LB − 1.
//
// Memory-aware bound (one chunk per stage only): zb_auto_search's lower bound on the longest
// stage span of any schedule whose per-stage memory stays within this row's own peak
// (gen/detail/zb_bound.hpp); "span gap" = the row's longest stage span / that bound − 1. For
// zb-auto rows it shows how close the search came to optimal at its memory.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/zb_auto.hpp>
#include <pipesched/model/transformer_costs.hpp>
#include <pipesched/transform/recompute.hpp>

namespace {

using namespace pipesched;

struct setting {
  std::uint32_t p = 4;
  std::uint32_t m = 8;
  std::uint32_t layers = 32;
  double comm = 0.0;
};

/// Per-layer profile of the model (units: one layer's forward, one layer's M_B).
transformer_profile layer_profile() {
  transformer_dims d;
  d.hidden = 4096;
  d.heads = 32;
  d.sequence = 2048;
  d.microbatch = 1;
  d.layers = 1;
  return transformer_costs(d, transformer_units::per_layer);
}

/// A row's generator parameters: costs and memory per stage (cost_model splits them over the v
/// chunks), the layers of one stage whatever the schedule. `with_input`: M_in too, the stage
/// slice's input activation (one tensor, not per layer), which only recomputation keeps.
generator_params row_params(const setting& st, std::uint32_t v, bool with_input) {
  if (st.layers % (st.p * v) != 0) {
    throw std::invalid_argument("layers not divisible by p*v");
  }
  const transformer_profile layer = layer_profile();
  const double per_stage = static_cast<double>(st.layers / st.p);
  generator_params gp;
  gp.stages = st.p;
  gp.microbatches = st.m;
  const op_costs c{layer.costs.forward * per_stage, layer.costs.backward_input * per_stage,
                   layer.costs.backward_weight * per_stage};
  const chunk_memory mem{layer.memory.activation * per_stage,
                         layer.memory.weight_grad_input * per_stage, 0.0,
                         with_input ? layer.memory.input : 0.0};
  gp.costs = cost_model::uniform(c.forward, c.backward_input, c.backward_weight, st.comm);
  gp.memory = memory_model(mem);
  return gp;
}

/// Makespan lower bound of the module comment, for the schedule's placement.
double lower_bound(const schedule& s, const cost_model& model) {
  const placement& pl = s.layout();
  const shaped_cost_model costs = model.for_shape(pl.stages(), pl.chunks(), "quality_table");
  const std::uint32_t g_count = pl.total_chunks();
  std::vector<double> reach(g_count, 0.0);  // earliest start of global chunk g's first F
  for (global_chunk g = 1; g < g_count; ++g) {
    const stage_index prev = pl.stage_of(g - 1);
    const stage_index cur = pl.stage_of(g);
    reach[g] = reach[g - 1] + costs.at(prev, pl.local_of(g - 1)).forward + costs.comm(prev, cur);
  }
  double lb = 0.0;
  for (stage_index st = 0; st < pl.stages(); ++st) {
    double busy = 0.0;
    double start = -1.0;
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      const op_costs& t = costs.at(st, c);
      busy += s.microbatches() * (t.forward + t.backward_input + t.backward_weight);
      const double r = reach[pl.global(st, c)];
      start = start < 0.0 ? r : std::min(start, r);
    }
    lb = std::max(lb, start + busy);
  }
  return lb;
}

struct row {
  std::string name;
  std::uint32_t v = 1;
  double bubble = 0.0;
  double makespan = 0.0;
  double lb = 0.0;
  double peak = 0.0;     // largest per-stage peak, in one layer's M_B
  double span = 0.0;     // longest stage span
  double span_lb = 0.0;  // memory-aware span bound; 0 when not computed (v > 1)
  std::string error;
};

row evaluate(const generator_entry& e, const setting& st) {
  row r;
  r.name = e.name;
  r.v = e.default_chunks;
  try {
    const generator_params gp = row_params(st, r.v, false);
    const schedule s = e.generate(gp);
    r.v = s.chunks();
    const simulation_result sim = simulate(s, gp.costs);
    memory_options mo;
    mo.record_curve = false;
    const memory_report mr = check_memory(s, gp.memory, mo);
    r.bubble = sim.bubble_rate;
    r.makespan = sim.makespan;
    r.lb = lower_bound(s, gp.costs);
    r.peak = mr.max_peak();
    r.span = sim.stages[sim.max_span_stage].span;
    if (s.chunks() == 1) {
      generator_params bound = gp;
      bound.memory_limit = r.peak;
      r.span_lb = zb_auto_search(bound).lower_bound;
    }
  } catch (const std::exception& ex) {
    r.error = ex.what();
  }
  return r;
}

/// Every chunk recomputed: R before its backward against R in idle slots (limit: each stage's
/// before-backward peak), and the schedule without recomputation.
struct recompute_row {
  std::string name;
  std::uint32_t v = 1;
  double plain_makespan = 0.0;
  double plain_peak = 0.0;
  double before_makespan = 0.0;
  double before_peak = 0.0;
  double idle_makespan = 0.0;
  double idle_peak = 0.0;
  double loose_makespan = 0.0;  // idle slots within the peak without recomputation
  double loose_peak = 0.0;
  std::string error;
};

recompute_row evaluate_recompute(const generator_entry& e, const setting& st) {
  recompute_row r;
  r.name = e.name;
  r.v = e.default_chunks;
  memory_options mo;
  mo.record_curve = false;
  try {
    const generator_params gp = row_params(st, r.v, true);
    const schedule s = e.generate(gp);
    r.v = s.chunks();
    r.plain_makespan = simulate(s, gp.costs, {false, false}).makespan;
    r.plain_peak = check_memory(s, gp.memory, mo).max_peak();
    recompute_options ro;
    ro.costs = gp.costs;
    ro.memory = gp.memory;
    const schedule before = with_recompute(s, all_chunks(s), ro);
    r.before_makespan = simulate(before, gp.costs, {false, false}).makespan;
    r.before_peak = check_memory(before, gp.memory, mo).max_peak();
    ro.placement = recompute_placement::idle_slot;
    const schedule idle = with_recompute(s, all_chunks(s), ro);
    r.idle_makespan = simulate(idle, gp.costs, {false, false}).makespan;
    r.idle_peak = check_memory(idle, gp.memory, mo).max_peak();
    ro.memory_limit = r.plain_peak;
    const schedule loose = with_recompute(s, all_chunks(s), ro);
    r.loose_makespan = simulate(loose, gp.costs, {false, false}).makespan;
    r.loose_peak = check_memory(loose, gp.memory, mo).max_peak();
  } catch (const std::exception& ex) {
    r.error = ex.what();
  }
  return r;
}

void print_recompute_table(const setting& st) {
  std::printf("### recompute all, p=%u, m=%u (%u layers, T_comm=%g)\n\n", st.p, st.m, st.layers,
              st.comm);
  std::printf(
      "| schedule | v | makespan | peak (M_B) | R before B: makespan | peak | R in idle slots: "
      "makespan | peak | gain | idle slots within the first peak: makespan | peak | gain |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const generator_entry& e : default_registry().entries()) {
    const recompute_row r = evaluate_recompute(e, st);
    if (!r.error.empty()) {
      std::printf("| %s | %u | n/a (%s) | | | | | | | | | |\n", r.name.c_str(), r.v,
                  r.error.c_str());
      continue;
    }
    auto gain = [&](double t) { return 100.0 * (r.before_makespan - t) / r.before_makespan; };
    std::printf(
        "| %s | %u | %.1f | %.1f | %.1f | %.2f | %.1f | %.2f | %.2f%% | %.1f | %.2f | %.2f%% |\n",
        r.name.c_str(), r.v, r.plain_makespan, r.plain_peak, r.before_makespan, r.before_peak,
        r.idle_makespan, r.idle_peak, gain(r.idle_makespan), r.loose_makespan, r.loose_peak,
        gain(r.loose_makespan));
  }
  std::printf("\n");
}

/// (value / bound − 1) in percent; rounding noise below the bound prints as 0.
double gap_percent(double value, double bound) {
  return std::max(0.0, 100.0 * (value / bound - 1.0));
}

void print_table(const setting& st) {
  std::printf("### p=%u, m=%u (%u layers, %u per stage, T_comm=%g)\n\n", st.p, st.m, st.layers,
              st.layers / st.p, st.comm);
  std::vector<row> rows;
  for (const generator_entry& e : default_registry().entries()) {
    rows.push_back(evaluate(e, st));
  }
  double ref_peak = 0.0;
  for (const row& r : rows) {
    if (r.name == "1f1b" && r.error.empty()) {
      ref_peak = r.peak;
    }
  }
  std::printf(
      "| schedule | v | bubble rate | makespan | LB | gap to LB | peak memory (M_B) |"
      " peak / 1F1B | span gap (same memory) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const row& r : rows) {
    if (!r.error.empty()) {
      std::printf("| %s | %u | n/a (%s) | | | | | | |\n", r.name.c_str(), r.v, r.error.c_str());
      continue;
    }
    char span_gap[32] = "n/a";
    if (r.span_lb > 0.0) {
      std::snprintf(span_gap, sizeof span_gap, "%.1f%%", gap_percent(r.span, r.span_lb));
    }
    std::printf("| %s | %u | %.1f%% | %.1f | %.1f | %.1f%% | %.1f | %.2f | %s |\n", r.name.c_str(),
                r.v, 100.0 * r.bubble, r.makespan, r.lb, gap_percent(r.makespan, r.lb), r.peak,
                ref_peak > 0.0 ? r.peak / ref_peak : 0.0, span_gap);
  }
  std::printf("\n");
}

std::uint32_t parse_count(const char* flag, const char* v) {
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (end == v || *end != '\0' || n == 0 || n > 4096) {
    std::fprintf(stderr, "quality_table: %s needs an integer in 1..4096, got \"%s\"\n", flag, v);
    std::exit(2);
  }
  return static_cast<std::uint32_t>(n);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint32_t p = 0;
  std::uint32_t m = 0;
  std::uint32_t layers = 32;
  double comm = 0.0;
  bool recompute = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--recompute") {
      recompute = true;
    } else if ((a == "--stages" || a == "-p") && i + 1 < argc) {
      p = parse_count("--stages", argv[++i]);
    } else if ((a == "--microbatches" || a == "-m") && i + 1 < argc) {
      m = parse_count("--microbatches", argv[++i]);
    } else if (a == "--layers" && i + 1 < argc) {
      layers = parse_count("--layers", argv[++i]);
    } else if (a == "--comm" && i + 1 < argc) {
      comm = std::strtod(argv[++i], nullptr);
      if (!(comm >= 0.0 && comm < 1e6)) {
        std::fprintf(stderr, "quality_table: --comm needs a value >= 0\n");
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: quality_table [--recompute] [--stages P --microbatches M] [--layers L] "
                   "[--comm T]\n");
      return 2;
    }
  }
  if ((p == 0) != (m == 0)) {
    std::fprintf(stderr, "quality_table: give both --stages and --microbatches, or neither\n");
    return 2;
  }
  const transformer_profile layer = layer_profile();
  std::printf(
      "GPT-like model h=4096 a=32 s=2048 b=1; per layer T_F=1 T_B=%.3f T_W=%.3f, "
      "M_B=1 M_W=%.3f\n\n",
      layer.costs.backward_input, layer.costs.backward_weight, layer.memory.weight_grad_input);
  auto table = recompute ? print_recompute_table : print_table;
  if (p != 0) {
    table(setting{p, m, layers, comm});
    return 0;
  }
  for (std::uint32_t pp : {4u, 8u, 16u}) {
    for (std::uint32_t k : {2u, 4u, 8u}) {
      table(setting{pp, k * pp, layers, comm});
    }
  }
  return 0;
}
