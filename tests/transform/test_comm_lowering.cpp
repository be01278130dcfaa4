#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/gpipe.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "support/ops.hpp"
#include "support/registry_shapes.hpp"

using namespace pipesched;
using namespace test_ops;

namespace {

const lowering_options late{receive_placement::late};

std::string listing(std::span<const op> ops) {
  std::string out;
  for (const op& o : ops) {
    out += out.empty() ? "" : " ";
    out += to_string(o);
  }
  return out;
}

std::vector<op> compute_ops(std::span<const op> ops) {
  std::vector<op> out;
  for (const op& o : ops) {
    if (is_compute(o.kind)) {
      out.push_back(o);
    }
  }
  return out;
}

/// Makespan from the timing simulator (a SEND/RECV pair is a blocking rendezvous); -1 when
/// the schedule deadlocks.
double blocking_makespan(const schedule& s, const cost_model& c) {
  simulate_options o;
  o.record_ops = false;
  o.critical_path = false;
  const simulation_result r = simulate(s, c, o);
  return r.completed() ? r.makespan : -1.0;
}

/// Peak number of live receive buffers on any stage: +1 at a RECV, -1 at its consumer.
std::size_t receive_buffer_peak(const schedule& s) {
  const placement& pl = s.layout();
  std::size_t peak = 0;
  for (stage_index st = 0; st < s.stages(); ++st) {
    std::size_t live = 0;
    for (const op& o : s.ops(st)) {
      const global_chunk g = pl.global(st, o.chunk);
      if (o.kind == op_kind::recv_forward || o.kind == op_kind::recv_backward) {
        peak = std::max(peak, ++live);
      } else if (o.kind == op_kind::forward && !pl.is_first(g) && pl.stage_of(g - 1) != st) {
        --live;
      } else if (produces_input_grad(o.kind) && !pl.is_last(g) && pl.stage_of(g + 1) != st) {
        --live;
      }
    }
  }
  return peak;
}

/// Number of cross-stage transfers of a spec (each lowers to one SEND and one RECV): along each
/// route, for the m/routes micro-batches that run it.
std::size_t transfers(const schedule& s) {
  const placement& pl = s.layout();
  std::size_t n = 0;
  for (global_chunk g = 0; g + 1 < pl.total_chunks(); ++g) {
    const bool cross = !pl.is_last(g) && pl.stage_of(g) != pl.stage_of(g + 1);
    n += cross ? std::size_t{2} : std::size_t{0};  // forward and backward
  }
  return n * (s.microbatches() / pl.routes());
}

/// The structural promises of lower_communication, beyond validity: compute order kept,
/// each SEND after its producer with only receives in between, the right number of comm ops.
void check_lowering(const schedule& in, const schedule& out) {
  REQUIRE(out.stages() == in.stages());
  CHECK(out.size() == in.size() + 2 * transfers(in));
  for (stage_index s = 0; s < in.stages(); ++s) {
    const auto ops = out.ops(s);
    CHECK(compute_ops(ops) == std::vector<op>(in.ops(s).begin(), in.ops(s).end()));
    for (std::size_t i = 0; i < ops.size(); ++i) {
      // An overlapped pair stays adjacent: no comm op between its two ops.
      if (overlaps_next(ops[i])) {
        REQUIRE(i + 1 < ops.size());
        CHECK(is_compute(ops[i + 1].kind));
      }
      if (ops[i].kind != op_kind::send_forward && ops[i].kind != op_kind::send_backward) {
        continue;
      }
      // Only receives sit between a SEND and its producer, and, after a pair, the pair's
      // second op and its SEND.
      std::size_t j = i;
      while (j > 0 && is_comm(ops[j - 1].kind)) {
        --j;
      }
      REQUIRE(j > 0);
      const auto produced = [&](const op& c) {
        return c.mb == ops[i].mb && c.chunk == ops[i].chunk &&
               (ops[i].kind == op_kind::send_forward ? c.kind == op_kind::forward
                                                     : produces_input_grad(c.kind));
      };
      const bool by_last = produced(ops[j - 1]);
      const bool by_pair = j >= 2 && overlaps_next(ops[j - 2]) && produced(ops[j - 2]);
      CHECK((by_last || by_pair));
      std::size_t sends = 0;  // at most the two SENDs of a pair in that stretch
      for (std::size_t k = j; k <= i; ++k) {
        sends +=
            ops[k].kind == op_kind::send_forward || ops[k].kind == op_kind::send_backward ? 1U : 0U;
      }
      CHECK(sends <= (by_pair || (j >= 2 && overlaps_next(ops[j - 2])) ? 2U : 1U));
    }
  }
}

/// A random valid compute schedule: a random dependency-respecting execution of all ops,
/// each stage's list being its ops in execution order.
schedule random_schedule(const placement& pl, std::uint32_t m, bool split, std::mt19937& rng) {
  schedule out = schedule::on("random", pl, m);
  struct pending {
    stage_index s;
    op o;
  };
  std::vector<pending> todo;
  for (stage_index s = 0; s < pl.stages(); ++s) {
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      for (microbatch_index j = 0; j < m; ++j) {
        todo.push_back({s, make_op(op_kind::forward, j, c)});
        if (split) {
          todo.push_back({s, make_op(op_kind::backward_input, j, c)});
          todo.push_back({s, make_op(op_kind::backward_weight, j, c)});
        } else {
          todo.push_back({s, make_op(op_kind::backward_full, j, c)});
        }
      }
    }
  }
  std::vector<std::uint8_t> done(std::size_t{pl.total_chunks()} * m, 0);
  while (!todo.empty()) {
    std::vector<std::size_t> ready;
    for (std::size_t i = 0; i < todo.size(); ++i) {
      bool ok = true;
      for (const requirement& r : requirements_of(pl, todo[i].s, todo[i].o, false)) {
        ok = ok && (done[std::size_t{r.chunk} * m + r.mb] & event_bit(r.what)) != 0;
      }
      if (ok) {
        ready.push_back(i);
      }
    }
    REQUIRE_FALSE(ready.empty());
    const std::size_t pick =
        ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng)];
    const pending t = todo[pick];
    todo.erase(todo.begin() + static_cast<std::ptrdiff_t>(pick));
    out.stage_ops(t.s).push_back(t.o);
    done[std::size_t{pl.global(t.s, t.o.chunk)} * m + t.o.mb] |= events_produced(t.o.kind);
  }
  return out;
}

/// GPipe-like schedule over several chunks: all F in model order, then all BW in reverse.
schedule chunked_gpipe(const placement& pl, std::uint32_t m) {
  schedule out = schedule::on("chunked-gpipe", pl, m);
  for (stage_index s = 0; s < pl.stages(); ++s) {
    std::vector<chunk_index> order(pl.chunks());
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      order[c] = c;
    }
    std::sort(order.begin(), order.end(),
              [&](chunk_index a, chunk_index b) { return pl.global(s, a) < pl.global(s, b); });
    for (chunk_index c : order) {
      for (microbatch_index j = 0; j < m; ++j) {
        out.stage_ops(s).push_back(F(j, c));
      }
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      for (microbatch_index j = 0; j < m; ++j) {
        out.stage_ops(s).push_back(BW(j, *it));
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("lowering 1F1B p=3 m=3: golden eager and late lists", "[gen][comm]") {
  const schedule in = generate(one_f_one_b{}, 3, 3);
  const schedule e = lower_communication(in);
  CHECK(listing(e.ops(0)) ==
        "F0 SEND_F0 F1 SEND_F1 F2 SEND_F2 RECV_B0 BW0 RECV_B1 BW1 RECV_B2 BW2");
  CHECK(listing(e.ops(1)) ==
        "RECV_F0 F0 RECV_F1 SEND_F0 F1 RECV_F2 SEND_F1 RECV_B0 BW0 SEND_B0 F2 RECV_B1 SEND_F2 "
        "BW1 SEND_B1 RECV_B2 BW2 SEND_B2");
  // Stage 2 starts BW0 at 3, when stage 1's F1 has ended: eager posts RECV_F1 before it.
  CHECK(listing(e.ops(2)) ==
        "RECV_F0 F0 RECV_F1 BW0 SEND_B0 F1 BW1 SEND_B1 RECV_F2 F2 BW2 SEND_B2");
  CHECK(validate(e).ok());
  // Late: every receive right before its consumer or before a SEND the consumer follows.
  const schedule l = lower_communication(in, late);
  CHECK(validate(l).ok());
  CHECK(listing(l.ops(0)) ==
        "F0 SEND_F0 F1 SEND_F1 F2 RECV_B0 SEND_F2 BW0 RECV_B1 BW1 RECV_B2 BW2");
  CHECK(listing(l.ops(1)) ==
        "RECV_F0 F0 SEND_F0 RECV_F1 F1 RECV_B0 SEND_F1 BW0 SEND_B0 RECV_F2 F2 SEND_F2 RECV_B1 "
        "BW1 SEND_B1 RECV_B2 BW2 SEND_B2");
  CHECK(listing(l.ops(2)) ==
        "RECV_F0 F0 BW0 SEND_B0 RECV_F1 F1 BW1 RECV_F2 SEND_B1 F2 BW2 SEND_B2");
}

TEST_CASE("lowering: receives go eagerly at their time, late just before the consumer",
          "[gen][comm]") {
  // GPipe p=2 m=3 with a slow stage 1 (T_F = 3): stage 0's forwards end at 1, 2, 3 while
  // stage 1 runs F0 at [1,4], F1 at [4,7], F2 at [7,10].
  const schedule in = generate(gpipe{}, 2, 3);
  cost_model costs;
  costs.set_stage_costs({op_costs{1, 1, 1}, op_costs{3, 1, 1}});
  const schedule e = lower_communication(in, lowering_options{receive_placement::eager, costs});
  const schedule l = lower_communication(in, lowering_options{receive_placement::late, costs});
  CHECK(listing(e.ops(0)) ==
        "F0 SEND_F0 F1 SEND_F1 F2 SEND_F2 RECV_B0 BW0 RECV_B1 BW1 RECV_B2 BW2");
  CHECK(listing(l.ops(0)) == listing(e.ops(0)));
  // Eager: F1 and F2 both have their data by time 4, when F1 starts.
  CHECK(listing(e.ops(1)) ==
        "RECV_F0 F0 RECV_F1 RECV_F2 F1 F2 BW0 SEND_B0 BW1 SEND_B1 BW2 SEND_B2");
  CHECK(listing(l.ops(1)) ==
        "RECV_F0 F0 RECV_F1 F1 RECV_F2 F2 BW0 SEND_B0 BW1 SEND_B1 BW2 SEND_B2");
  CHECK(validate(e).ok());
  CHECK(validate(l).ok());
  CHECK(receive_buffer_peak(e) == 2);
  CHECK(receive_buffer_peak(l) == 1);
}

TEST_CASE("placing every receive just before its consumer deadlocks with blocking sends",
          "[gen][comm][deadlock]") {
  // The naive lowering of 1F1B p=2 m=2: stage 0's SEND_F1 waits for stage 1's RECV_F1, which
  // stage 1 posts only after its SEND_B0, which waits for stage 0's RECV_B0, posted after
  // SEND_F1.
  schedule naive = schedule::sequential("naive", 2, 2);
  naive.stage_ops(0) = {F(0), SF(0), F(1), SF(1), RB(0), BW(0), RB(1), BW(1)};
  naive.stage_ops(1) = {RF(0), F(0), BW(0), SB(0), RF(1), F(1), BW(1), SB(1)};
  const auto r = validate(naive);
  CHECK(r.count(violation_kind::comm_mismatch) == 0);
  CHECK(r.count(violation_kind::local_order) == 0);
  REQUIRE(r.deadlock.has_value());
  CHECK(r.deadlock->cycle == std::vector<stage_index>{0, 1});
  REQUIRE(r.deadlock->stuck.size() == 2);
  CHECK(r.deadlock->stuck[0].blocked == SF(1));
  CHECK(r.deadlock->stuck[1].blocked == SB(0));

  // The lowering keeps the receive ranked before the send in front of it.
  const schedule in = generate(one_f_one_b{}, 2, 2);
  const schedule l = lower_communication(in, late);
  CHECK(listing(l.ops(0)) == "F0 SEND_F0 F1 SEND_F1 RECV_B0 BW0 RECV_B1 BW1");
  CHECK(listing(l.ops(1)) == "RECV_F0 F0 BW0 RECV_F1 SEND_B0 F1 BW1 SEND_B1");
  CHECK(validate(l).ok());
}

TEST_CASE("lowering is deadlock-free for every registered generator on the grid",
          "[gen][comm][grid]") {
  for (const auto& entry : default_registry().entries()) {
    for (std::uint32_t p = 1; p <= 8; ++p) {
      for (std::uint32_t m = 1; m <= 16; ++m) {
        generator_params gp;
        gp.stages = p;
        gp.microbatches = m;
        const auto generated = test_support::generate_if_served(entry, gp);
        if (!generated) {
          continue;
        }
        const schedule& in = *generated;
        INFO(entry.name << " p=" << p << " m=" << m << " v=" << in.chunks());
        for (const auto& opts : {lowering_options{}, late}) {
          const schedule out = lower_communication(in, opts);
          const auto r = validate(out);
          INFO((r.ok() ? std::string("ok") : r.violations.front().message));
          REQUIRE(r.ok());
          check_lowering(in, out);
        }
      }
    }
  }
}

TEST_CASE("lowering loop and V placements: no transfer at the V turn", "[gen][comm]") {
  SECTION("V, p=3: chunks 2 and 3 are both on stage 2") {
    const schedule in = chunked_gpipe(placement::v_shape(3), 4);
    REQUIRE(validate(in).ok());
    for (const auto& opts : {lowering_options{}, late}) {
      const schedule out = lower_communication(in, opts);
      CHECK(validate(out).ok());
      check_lowering(in, out);
      // Stage 2 holds global chunks 2 and 3: it receives chunk 2's input and chunk 3's
      // gradient and sends the other way, never to itself.
      std::size_t comm2 = 0;
      for (const op& o : out.ops(2)) {
        if (is_comm(o.kind)) {
          ++comm2;
          CHECK(comm_peer(out.layout(), 2, o) == std::optional<stage_index>{1});
        }
      }
      CHECK(comm2 == 4 * 4);  // RECV_F/SEND_B of chunk 0 and SEND_F/RECV_B of chunk 1
      // 4 cross-stage links (0-1, 1-2, 3-4, 4-5), 2 directions, 4 micro-batches, 2 ops each.
      CHECK(out.size() == in.size() + 4 * 2 * 4 * 2);
    }
  }
  SECTION("loop, p=4 v=3 and p=1") {
    for (std::uint32_t p : {1u, 4u}) {
      const schedule in = chunked_gpipe(placement::loop(p, 3), 5);
      REQUIRE(validate(in).ok());
      for (const auto& opts : {lowering_options{}, late}) {
        const schedule out = lower_communication(in, opts);
        CHECK(validate(out).ok());
        check_lowering(in, out);
        if (p == 1) {
          CHECK(out == in);
        }
      }
    }
  }
}

TEST_CASE("lowering random valid schedules on random placements", "[gen][comm][random]") {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 150; ++trial) {
    const std::uint32_t p = 1 + static_cast<std::uint32_t>(rng() % 5);
    const std::uint32_t m = 1 + static_cast<std::uint32_t>(rng() % 5);
    const int kind = static_cast<int>(rng() % 4);
    placement pl;
    if (kind == 0) {
      pl = placement::sequential(p);
    } else if (kind == 1) {
      pl = placement::loop(p, 1 + static_cast<std::uint32_t>(rng() % 3));
    } else if (kind == 2) {
      pl = placement::v_shape(p);
    } else {
      const std::uint32_t v = 1 + static_cast<std::uint32_t>(rng() % 3);
      std::vector<global_chunk> table(std::size_t{p} * v);
      for (std::size_t i = 0; i < table.size(); ++i) {
        table[i] = static_cast<global_chunk>(i);
      }
      std::shuffle(table.begin(), table.end(), rng);
      pl = placement::custom(p, v, table);
    }
    const schedule in = random_schedule(pl, m, rng() % 2 == 0, rng);
    INFO("trial " << trial << " p=" << p << " m=" << m << " v=" << pl.chunks() << " placement "
                  << to_string(pl.kind()));
    REQUIRE(validate(in).ok());
    cost_model costs =
        cost_model::uniform(1.0 + static_cast<double>(rng() % 3), static_cast<double>(rng() % 3),
                            1.0, static_cast<double>(rng() % 2));
    for (auto where : {receive_placement::eager, receive_placement::late}) {
      const schedule out = lower_communication(in, lowering_options{where, costs});
      const auto r = validate(out);
      INFO((r.ok() ? std::string("ok") : r.violations.front().message));
      REQUIRE(r.ok());
      check_lowering(in, out);
    }
  }
}

TEST_CASE("late receives need no more buffers than eager ones", "[gen][comm][memory]") {
  for (const auto& entry : default_registry().entries()) {
    for (std::uint32_t p : {2u, 4u, 8u}) {
      for (std::uint32_t m : {1u, 4u, 8u, 16u}) {
        generator_params gp;
        gp.stages = p;
        gp.microbatches = m;
        const auto generated = test_support::generate_if_served(entry, gp);
        if (!generated) {
          continue;
        }
        const schedule& in = *generated;
        INFO(entry.name << " p=" << p << " m=" << m);
        const auto e = detail::receive_buffer_profile(lower_communication(in));
        const auto l = detail::receive_buffer_profile(lower_communication(in, late));
        CHECK(l[0] <= e[0]);
        CHECK(receive_buffer_peak(lower_communication(in, late)) == l[0]);
        if (entry.name == "gpipe" || entry.name == "gpipe-split" || entry.name == "1f1b") {
          // The next compute op after each RECV is its consumer, so the total lifetime is
          // the number of receives.
          CHECK(l[2] == transfers(in));
        }
        // Schedules that keep at most one transfer in flight per stage need one buffer; ZB-H2
        // style warm-ups, zb-auto and multi-chunk schedules legitimately hold more.
        if (entry.name == "gpipe" || entry.name == "gpipe-split" || entry.name == "1f1b" ||
            entry.name == "1f1b-split" || entry.name == "zb-h1") {
          CHECK(l[0] == 1);
        }
      }
    }
  }
  // p=4, m=8 (profile: largest stage peak, sum of stage peaks, total lifetime).
  const auto profile = [](const char* name, receive_placement where) {
    generator_params gp;
    gp.stages = 4;
    gp.microbatches = 8;
    return detail::receive_buffer_profile(
        lower_communication(default_registry().generate(name, gp), lowering_options{where}));
  };
  using prof = std::array<std::size_t, 3>;
  CHECK(profile("1f1b", receive_placement::eager) == prof{2, 6, 51});
  CHECK(profile("1f1b", receive_placement::late) == prof{1, 4, 48});
  CHECK(profile("zb-h1", receive_placement::eager) == prof{2, 6, 63});
  CHECK(profile("zb-h1", receive_placement::late) == prof{1, 4, 52});
  CHECK(profile("zb-h2", receive_placement::late) == prof{2, 7, 63});
}

TEST_CASE("eager lowering keeps the compute-only makespan at unit costs and no T_comm",
          "[gen][comm][timing]") {
  const cost_model unit = cost_model::unit();
  for (const auto& entry : default_registry().entries()) {
    for (std::uint32_t p : {1u, 2u, 4u, 7u}) {
      for (std::uint32_t m : {1u, 3u, 8u, 13u}) {
        generator_params gp;
        gp.stages = p;
        gp.microbatches = m;
        const auto generated = test_support::generate_if_served(entry, gp);
        if (!generated) {
          continue;
        }
        const schedule& in = *generated;
        INFO(entry.name << " p=" << p << " m=" << m);
        const double base = blocking_makespan(in, unit);
        if (in.chunks() == 1) {
          CHECK(blocking_makespan(lower_communication(in), unit) == base);
        } else {
          // Several chunks per stage: a rendezvous can find the receiver in the middle of a
          // compute op, so blocking transfers may cost time (buffered sends would not).
          CHECK(blocking_makespan(lower_communication(in), unit) >= base);
        }
        // Late trades time for buffers: blocking SENDs wait for late receivers.
        CHECK(blocking_makespan(lower_communication(in, late), unit) >= base);
      }
    }
  }
}

TEST_CASE("lowering rejects lowered and invalid input", "[gen][comm][errors]") {
  const schedule lowered = lower_communication(generate(one_f_one_b{}, 2, 2));
  CHECK_THROWS_AS(lower_communication(lowered), invalid_argument);
  CHECK_THROWS_WITH(lower_communication(lowered),
                    "lower_communication: input schedule \"1f1b\" is already lowered (stage 0, "
                    "op 1 is SEND_F0); pass a compute-only schedule");

  schedule missing = schedule::sequential("broken", 2, 1);
  missing.stage_ops(0) = {F(0), BW(0)};
  missing.stage_ops(1) = {F(0)};
  CHECK_THROWS_WITH(lower_communication(missing),
                    "lower_communication: input schedule \"broken\" is invalid: stage 1: "
                    "backward (BW, or B and W) 0 of chunk 0 is missing");

  schedule stuck = schedule::sequential("stuck", 2, 2);
  stuck.stage_ops(0) = {F(0), BW(0), F(1), BW(1)};
  stuck.stage_ops(1) = {F(0), F(1), BW(1), BW(0)};
  CHECK_THROWS_WITH(lower_communication(stuck),
                    Catch::Matchers::StartsWith(
                        "lower_communication: input schedule \"stuck\" is invalid: deadlock: "
                        "stage 0 blocked at op 1 (BW0)"));
}

TEST_CASE("lowering a one-stage schedule changes nothing", "[gen][comm]") {
  const schedule in = generate(zb_h1{}, 1, 4);
  CHECK(lower_communication(in) == in);
  CHECK(lower_communication(in, late) == in);
}

TEST_CASE("memory checker: late receives lower the receive-buffer peak", "[gen][comm][memory]") {
  // Only receive buffers cost memory here, so a stage's peak counts its live receives.
  const memory_model only_received(chunk_memory{0.0, 0.0, 1.0});
  auto peaks = [&](const schedule& s) {
    const memory_report r = check_memory(s, only_received);
    REQUIRE(r.errors.empty());
    std::vector<double> out;
    for (const auto& st : r.stages) {
      out.push_back(st.peak);
    }
    return out;
  };
  // GPipe p=2 m=3 with a slow stage 1 (see above): eager holds F1's and F2's inputs at once.
  cost_model costs;
  costs.set_stage_costs({op_costs{1, 1, 1}, op_costs{3, 1, 1}});
  const schedule g = generate(gpipe{}, 2, 3);
  CHECK(peaks(lower_communication(g, lowering_options{receive_placement::eager, costs})) ==
        std::vector<double>{1, 2});
  CHECK(peaks(lower_communication(g, lowering_options{receive_placement::late, costs})) ==
        std::vector<double>{1, 1});
  // 1F1B p=4 m=8, unit costs: the middle stages hold an activation and a gradient eagerly.
  const schedule f = generate(one_f_one_b{}, 4, 8);
  CHECK(peaks(lower_communication(f)) == std::vector<double>{1, 2, 2, 1});
  CHECK(peaks(lower_communication(f, late)) == std::vector<double>{1, 1, 1, 1});

  // With activations too (M_B = 1, M_W = 0.5, receive buffer 0.25), stage 1 of 1F1B.
  const memory_model full(chunk_memory{1.0, 0.5, 0.25});
  const double eager_peak = check_memory(lower_communication(f), full).stages[1].peak;
  const double late_peak = check_memory(lower_communication(f, late), full).stages[1].peak;
  CHECK(late_peak < eager_peak);
  CHECK(late_peak >= 3.0);  // 1F1B stage 1 holds p-1 = 3 activations
}

TEST_CASE("lowering keeps overlapped pairs adjacent and marked, as PyTorch lowers OVERLAP_F_B",
          "[gen][comm][overlap]") {
  // ZB-H1 with stage 0's F1 marked to overlap the B0 after it: a valid pair (no dependency).
  schedule s = generate(zb_h1{}, 2, 4);
  auto& ops1 = s.stage_ops(0);
  std::size_t marked = ops1.size();
  for (std::size_t i = 0; i + 1 < ops1.size(); ++i) {
    if (ops1[i].kind == op_kind::forward && ops1[i + 1].kind == op_kind::backward_input &&
        ops1[i].mb != ops1[i + 1].mb) {
      ops1[i] = overlapping_next(ops1[i]);
      marked = i;
      break;
    }
  }
  REQUIRE(marked == 1);  // F0 (F1;B0) W0 F2 ...
  REQUIRE(validate(s).ok());
  for (const auto& opts : {lowering_options{}, late}) {
    const schedule low = lower_communication(s, opts);
    CHECK(validate(low).ok());
    check_lowering(s, low);
    // Stage 0: the pair's receive (B0's gradient) before it, its send (F1's activation)
    // after it, and the mark on F1.
    const std::string l = listing(low.ops(0));
    INFO(l);
    const std::size_t pair = l.find("F1 B0");
    REQUIRE(pair != std::string::npos);
    CHECK(l.find("RECV_B0") < pair);
    CHECK(l.find("SEND_F1") > pair);
    std::size_t marks = 0;
    for (const op& o : low.ops(0)) {
      marks += overlaps_next(o) ? 1U : 0U;
    }
    CHECK(marks == 1);
    // It runs under blocking transfers, the pair as one slot.
    CHECK(blocking_makespan(low, cost_model::unit()) > 0.0);
  }
  // DualPipeV: every pair kept; PyTorch's golden order (p = 4, m = 10) lowers and runs.
  for (auto [p, m] : {std::pair{4U, 10U}, {2U, 4U}, {3U, 7U}, {8U, 16U}}) {
    INFO("dualpipev p=" << p << " m=" << m);
    generator_params gp;
    gp.stages = p;
    gp.microbatches = m;
    const schedule d = default_registry().generate("dualpipev", gp);
    for (const auto& opts : {lowering_options{}, late}) {
      const schedule low = lower_communication(d, opts);
      const auto r = validate(low);
      INFO((r.ok() ? std::string("ok") : r.violations.front().message));
      REQUIRE(r.ok());
      check_lowering(d, low);
      CHECK(blocking_makespan(low, cost_model::unit()) >= blocking_makespan(d, cost_model::unit()));
    }
  }
}

TEST_CASE("routes: lowering sends and receives in both directions", "[transform][comm][routes]") {
  schedule s = schedule::on("dual", placement::dual(2), 2);
  s.stage_ops(0) = {F(0, 0), F(1, 1), BW(1, 1), BW(0, 0)};
  s.stage_ops(1) = {F(1, 1), F(0, 0), BW(0, 0), BW(1, 1)};
  const schedule low = lower_communication(s);
  CHECK(validate(low).ok());
  // Micro-batch 0 goes 0 -> 1 on chunk 0, micro-batch 1 goes 1 -> 0 on chunk 1.
  CHECK(comm_peer(low.layout(), 0, SF(0, 0)) == stage_index{1});
  CHECK(comm_peer(low.layout(), 1, SF(1, 1)) == stage_index{0});
  CHECK(comm_peer(low.layout(), 0, SB(1, 1)) == stage_index{1});
  CHECK(comm_peer(low.layout(), 1, SB(0, 0)) == stage_index{0});
  CHECK_FALSE(comm_peer(low.layout(), 0, SF(1, 1)).has_value());  // route 1's last chunk
  auto count = [&](stage_index st, const op& o) {
    return std::count(low.ops(st).begin(), low.ops(st).end(), o);
  };
  CHECK(count(0, SF(0, 0)) == 1);
  CHECK(count(0, RF(1, 1)) == 1);
  CHECK(count(0, SB(1, 1)) == 1);
  CHECK(count(0, RB(0, 0)) == 1);
  CHECK(count(1, SF(1, 1)) == 1);
  CHECK(count(1, RF(0, 0)) == 1);
  CHECK(count(1, SB(0, 0)) == 1);
  CHECK(count(1, RB(1, 1)) == 1);
  CHECK(low.size() == s.size() + 8);
  // The simulator and the memory checker read the routes too.
  CHECK(simulate(low, cost_model::unit()).completed());
  CHECK(check_memory(low).errors.empty());
}
