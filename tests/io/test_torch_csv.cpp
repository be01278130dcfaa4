#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/dualpipe.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "support/registry_shapes.hpp"

using namespace pipesched;

namespace {

// What PyTorch's loaders require of a file, checked on the text alone (independently of
// from_torch_csv), after torch/distributed/pipelining/schedules.py: `_Action.from_str`,
// `_validate_schedule`, `_PipelineScheduleRuntime._load_csv(..., "compute_comms")` and the
// runtime's receive / send bookkeeping, and `_simulate_comms_compute` made blocking.

// One action, its kind in the current spelling (I input gradient, B full backward).
struct action {
  std::uint64_t stage = 0;
  std::string kind;
  std::uint64_t mb = 0;
  bool operator<(const action& o) const {
    return std::tie(stage, kind, mb) < std::tie(o.stage, o.kind, o.mb);
  }
  bool operator==(const action& o) const {
    return stage == o.stage && kind == o.kind && mb == o.mb;
  }
};

struct action_file {
  std::vector<std::vector<action>> rows;  // one per rank
  std::size_t empty_cells = 0;            // cells PyTorch reads as None
  std::map<std::uint64_t, std::size_t> rank_of;
  std::uint64_t stages = 0;
};

bool is_send_kind(const std::string& k) {
  return k == "SEND_F" || k == "SEND_B";
}
bool is_recv_kind(const std::string& k) {
  return k == "RECV_F" || k == "RECV_B";
}

// Splits the text the way csv.reader does for these files (no quoting): a row per line, a
// cell per comma; an empty line is a rank with no actions.
action_file read_actions(const std::string& csv, torch_spelling sp) {
  action_file f;
  std::size_t pos = 0;
  while (pos < csv.size()) {
    std::size_t eol = csv.find('\n', pos);
    REQUIRE(eol != std::string::npos);  // every row ends with '\n'
    const std::string line = csv.substr(pos, eol - pos);
    pos = eol + 1;
    std::vector<action> row;
    for (std::size_t c = 0; !line.empty() && c <= line.size();) {
      std::size_t comma = line.find(',', c);
      comma = comma == std::string::npos ? line.size() : comma;
      const std::string cell = line.substr(c, comma - c);
      c = comma + 1;
      if (cell.empty()) {
        ++f.empty_cells;
        continue;
      }
      // `_Action.from_str`: an OVERLAP_F_B cell holds two sub-actions, "(0F7;7B3)OVERLAP_F_B".
      auto parse = [&](const std::string& text) {
        std::size_t i = 0;
        action a;
        auto digits = [&](std::uint64_t& v) {
          const std::size_t from = i;
          for (v = 0; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
            v = v * 10 + static_cast<std::uint64_t>(text[i] - '0');
          }
          return i > from;
        };
        INFO("text \"" << text << "\"");
        REQUIRE(digits(a.stage));
        const std::size_t k0 = i;
        while (i < text.size() && ((text[i] >= 'A' && text[i] <= 'Z') || text[i] == '_')) {
          ++i;
        }
        a.kind = text.substr(k0, i - k0);
        REQUIRE(digits(a.mb));
        REQUIRE(i == text.size());
        if (sp == torch_spelling::legacy) {
          REQUIRE(a.kind != "I");
          a.kind = a.kind == "B" ? "I" : a.kind == "BW" ? "B" : a.kind;
        } else {
          REQUIRE(a.kind != "BW");
        }
        const std::set<std::string> known{"F",      "I",      "B",      "W",
                                          "SEND_F", "RECV_F", "SEND_B", "RECV_B"};
        REQUIRE(known.count(a.kind) == 1);
        row.push_back(a);
      };
      const std::string suffix = ")OVERLAP_F_B";
      if (cell.front() == '(') {
        INFO("cell \"" << cell << "\"");
        REQUIRE(cell.size() > suffix.size());
        REQUIRE(cell.substr(cell.size() - suffix.size()) == suffix);
        const std::string inner = cell.substr(1, cell.size() - suffix.size() - 1);
        const std::size_t semi = inner.find(';');
        REQUIRE(semi != std::string::npos);
        parse(inner.substr(0, semi));
        parse(inner.substr(semi + 1));
        continue;
      }
      parse(cell);
    }
    f.rows.push_back(std::move(row));
  }
  for (std::size_t r = 0; r < f.rows.size(); ++r) {
    for (const action& a : f.rows[r]) {
      const auto [it, fresh] = f.rank_of.emplace(a.stage, r);
      INFO("stage " << a.stage);
      REQUIRE(it->second == r);  // a stage lives on one rank
      f.stages = std::max(f.stages, a.stage + 1);
    }
  }
  return f;
}

// `_validate_schedule`: per stage m forwards, as many I as W, B + I = m; per rank, a backward
// after its forward and a W after its I.
void check_compute_counts(const action_file& f, std::uint64_t m) {
  std::map<std::pair<std::uint64_t, std::string>, std::set<std::uint64_t>> seen;
  for (const auto& row : f.rows) {
    for (const action& a : row) {
      INFO(a.stage << a.kind << a.mb);
      if (a.kind == "I" || a.kind == "B") {
        CHECK(seen[{a.stage, "F"}].count(a.mb) == 1);
      } else if (a.kind == "W") {
        CHECK(seen[{a.stage, "I"}].count(a.mb) == 1);
      }
      seen[{a.stage, a.kind}].insert(a.mb);
    }
  }
  for (std::uint64_t g = 0; g < f.stages; ++g) {
    INFO("stage " << g);
    CHECK(seen[{g, "F"}].size() == m);
    CHECK(seen[{g, "I"}].size() == seen[{g, "W"}].size());
    CHECK(seen[{g, "B"}].size() + seen[{g, "I"}].size() == m);
  }
}

// The RECV a SEND pairs with: SEND_F of stage g with RECV_F of g + 1, SEND_B of g with RECV_B
// of g - 1 (the stage index in a SEND is the sender's, in a RECV the receiver's).
action partner(const action& send) {
  return send.kind == "SEND_F" ? action{send.stage + 1, "RECV_F", send.mb}
                               : action{send.stage - 1, "RECV_B", send.mb};
}

// Every SEND has exactly one RECV on the rank of the peer stage and the other way round; no
// transfer between two stages of one rank (PyTorch passes those locally).
void check_pairs(const action_file& f) {
  std::multiset<action> sends_want;
  std::multiset<action> recvs;
  for (std::size_t r = 0; r < f.rows.size(); ++r) {
    for (const action& a : f.rows[r]) {
      INFO("rank " << r << ": " << a.stage << a.kind << a.mb);
      if (is_send_kind(a.kind)) {
        REQUIRE((a.kind == "SEND_F" ? a.stage + 1 < f.stages : a.stage > 0));
        const action want = partner(a);
        CHECK(f.rank_of.at(want.stage) != r);
        sends_want.insert(want);
      } else if (is_recv_kind(a.kind)) {
        recvs.insert(a);
      }
    }
  }
  CHECK(sends_want == recvs);
  CHECK(std::set<action>(recvs.begin(), recvs.end()).size() == recvs.size());  // each once
}

// Runs the rows as blocking (MPI_Ssend-like) point-to-point would: a SEND completes only
// together with its RECV at the head of the peer's row. A compute op needs its input on its
// own rank: a RECV earlier in the row, or the adjacent stage's op when that stage is local (as
// in `_simulate_comms_compute` and the runtime, which asserts a RECV_F / RECV_B was posted
// before an F / I / B whose neighbour stage is remote). Returns "" when every row runs to the
// end, else the action each stuck rank waits at.
std::string blocking_dry_run(const action_file& f) {
  const std::size_t p = f.rows.size();
  std::vector<std::size_t> pos(p, 0);
  std::vector<std::set<action>> done(p);
  auto has = [&](std::size_t r, std::uint64_t stage, const char* kind, std::uint64_t mb) {
    return done[r].count(action{stage, kind, mb}) == 1;
  };
  const std::uint64_t last = f.stages - 1;
  auto ready = [&](std::size_t r, const action& a) {
    if (a.kind == "F") {
      return a.stage == 0 || has(r, a.stage, "RECV_F", a.mb) || has(r, a.stage - 1, "F", a.mb);
    }
    if (a.kind == "I" || a.kind == "B") {
      return a.stage == last || has(r, a.stage, "RECV_B", a.mb) || has(r, a.stage + 1, "I", a.mb) ||
             has(r, a.stage + 1, "B", a.mb);
    }
    if (a.kind == "W") {
      return has(r, a.stage, "I", a.mb);
    }
    if (a.kind == "SEND_F") {
      return has(r, a.stage, "F", a.mb);
    }
    if (a.kind == "SEND_B") {
      return has(r, a.stage, "I", a.mb) || has(r, a.stage, "B", a.mb);
    }
    return false;  // a RECV waits for its sender, which completes both
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t r = 0; r < p; ++r) {
      while (pos[r] < f.rows[r].size()) {
        const action& a = f.rows[r][pos[r]];
        if (!ready(r, a)) {
          break;
        }
        if (is_send_kind(a.kind)) {
          const action want = partner(a);
          const auto peer = f.rank_of.find(want.stage);
          if (peer == f.rank_of.end()) {
            break;
          }
          const std::size_t q = peer->second;
          if (q == r || pos[q] == f.rows[q].size() || !(f.rows[q][pos[q]] == want)) {
            break;
          }
          done[q].insert(want);
          ++pos[q];
        }
        done[r].insert(a);
        ++pos[r];
        progress = true;
      }
    }
  }
  std::string stuck;
  for (std::size_t r = 0; r < p; ++r) {
    if (pos[r] < f.rows[r].size()) {
      const action& a = f.rows[r][pos[r]];
      stuck += "rank " + std::to_string(r) + " at " + std::to_string(a.stage) + a.kind +
               std::to_string(a.mb) + "; ";
    }
  }
  return stuck;
}

// Every check above, for a file written from `s`.
void check_torch_file(const schedule& s, const torch_csv_options& opts) {
  const std::string csv = to_torch_csv(s, opts);
  INFO(csv);
  CHECK(from_torch_csv(csv) == s);
  const action_file f = read_actions(csv, opts.spelling);
  CHECK(f.rows.size() == s.stages());
  if (opts.alignment == torch_alignment::list_order) {
    CHECK(f.empty_cells == 0);
  }
  check_compute_counts(f, s.microbatches());
  if (s.has_comm()) {
    check_pairs(f);
    CHECK(blocking_dry_run(f).empty());
  }
}

// GPipe-like order over all chunks of a two-chunk placement: every F, then every BW in reverse
// chunk order; valid for loop and V placements.
schedule two_chunk(const placement& pl, std::uint32_t m, bool split) {
  schedule s = schedule::on("two-chunk", pl, m);
  for (stage_index st = 0; st < pl.stages(); ++st) {
    auto& ops = s.stage_ops(st);
    for (chunk_index c = 0; c < 2; ++c) {
      for (microbatch_index j = 0; j < m; ++j) {
        ops.push_back(make_op(op_kind::forward, j, c));
      }
    }
    for (int c = 1; c >= 0; --c) {
      for (microbatch_index j = 0; j < m; ++j) {
        if (split) {
          ops.push_back(make_op(op_kind::backward_input, j, static_cast<chunk_index>(c)));
          ops.push_back(make_op(op_kind::backward_weight, j, static_cast<chunk_index>(c)));
        } else {
          ops.push_back(make_op(op_kind::backward_full, j, static_cast<chunk_index>(c)));
        }
      }
    }
  }
  return s;
}

std::string csv_error(const std::string& csv) {
  try {
    (void)from_torch_csv(csv);
  } catch (const invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("torch csv: golden 1F1B p=2 m=2, unit steps, both spellings", "[io][torch_csv]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  CHECK(to_torch_csv(s) == "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1\n");
  CHECK(to_torch_csv(s, {torch_spelling::legacy, torch_alignment::unit_steps}) ==
        "0F0,0F1,,0BW0,,0BW1\n,1F0,1BW0,1F1,1BW1\n");
  CHECK(to_torch_csv(s, {torch_spelling::current, torch_alignment::list_order}) ==
        "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
}

TEST_CASE("torch csv: golden ZB-H1 p=2 m=2 uses I and W", "[io][torch_csv]") {
  const schedule s = generate(zb_h1{}, 2, 2);
  // stage 0: F0 F1 B0 W0 B1 W1; stage 1: F0 B0 F1 B1 W0 W1 (unit steps)
  CHECK(to_torch_csv(s) == "0F0,0F1,,0I0,0W0,0I1,0W1\n,1F0,1I0,1F1,1I1,1W0,1W1\n");
  CHECK(to_torch_csv(s, {torch_spelling::legacy, torch_alignment::unit_steps}) ==
        "0F0,0F1,,0B0,0W0,0B1,0W1\n,1F0,1B0,1F1,1B1,1W0,1W1\n");
}

TEST_CASE("torch csv: round trips for both spellings and alignments", "[io][torch_csv]") {
  for (const schedule& s : {generate(one_f_one_b{}, 4, 8), generate(zb_h1{}, 4, 8),
                            generate(zb_h2{}, 3, 5), generate(one_f_one_b{true}, 3, 4)}) {
    for (torch_spelling sp : {torch_spelling::current, torch_spelling::legacy}) {
      for (torch_alignment al : {torch_alignment::unit_steps, torch_alignment::list_order}) {
        const schedule back = from_torch_csv(to_torch_csv(s, {sp, al}));
        CHECK(back == s);
        CHECK(back.stages() == s.stages());
        CHECK(back.microbatches() == s.microbatches());
      }
    }
  }
}

TEST_CASE("torch csv: multi-chunk placements are inferred", "[io][torch_csv]") {
  SECTION("loop") {
    const schedule s = two_chunk(placement::loop(2, 2), 2, false);
    REQUIRE(validate(s).ok());
    const std::string csv = to_torch_csv(s, {torch_spelling::current, torch_alignment::list_order});
    CHECK(csv == "0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1\n1F0,1F1,3F0,3F1,3B0,3B1,1B0,1B1\n");
    const schedule back = from_torch_csv(csv);
    CHECK(back.layout().kind() == placement_kind::loop);
    CHECK(back == s);
  }
  SECTION("V") {
    const schedule s = two_chunk(placement::v_shape(2), 2, true);
    REQUIRE(validate(s).ok());
    const schedule back = from_torch_csv(to_torch_csv(s));
    CHECK(back.layout().kind() == placement_kind::v_shape);
    CHECK(back == s);
    CHECK(to_torch_csv(s).substr(0, 4) == "0F0,");
  }
  SECTION("custom") {
    const placement pl = placement::custom(2, 2, {1, 2, 0, 3});
    const schedule s = two_chunk(pl, 1, false);
    REQUIRE(validate(s).ok());
    const schedule back = from_torch_csv(to_torch_csv(s));
    CHECK(back.layout().kind() == placement_kind::custom);
    CHECK(back == s);
  }
}

TEST_CASE("torch csv: spelling rule for files with neither I nor BW", "[io][torch_csv]") {
  // No W: B is the full backward.
  const schedule a = from_torch_csv("0F0,0B0\n");
  CHECK(a.ops(0)[1].kind == op_kind::backward_full);
  // With W: B is the input gradient.
  const schedule b = from_torch_csv("0F0,0B0,0W0\n");
  CHECK(b.ops(0)[1].kind == op_kind::backward_input);
  // I present: B is full backward even with W elsewhere.
  const schedule c = from_torch_csv("0F0,0I0,0W0,0F1,0B1\n");
  CHECK(c.ops(0)[1].kind == op_kind::backward_input);
  CHECK(c.ops(0)[4].kind == op_kind::backward_full);
  // BW present: B is the input gradient.
  const schedule d = from_torch_csv("0F0,0BW0,0F1,0B1,0W1\n");
  CHECK(d.ops(0)[1].kind == op_kind::backward_full);
  CHECK(d.ops(0)[3].kind == op_kind::backward_input);
}

TEST_CASE("torch csv: lenient layout", "[io][torch_csv]") {
  const schedule s = from_torch_csv(" 0F0 , ,\"0B0\"\r\n,,1F0,1B0\r\n\n\n", "x");
  CHECK(s.name() == "x");
  CHECK(s.stages() == 2);
  CHECK(s.microbatches() == 1);
  CHECK(s.ops(0).size() == 2);
  // FSDP actions without a micro-batch are skipped; comm actions are kept.
  const schedule t =
      from_torch_csv("0UNSHARD,0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  CHECK(t.ops(0).size() == 4);
  CHECK(t.ops(0)[1].kind == op_kind::send_forward);
  CHECK(t.has_comm());
  CHECK(validate(t).ok());
  CHECK(from_torch_csv(to_torch_csv(t)) == t);
  // An idle rank written as commas only (its stage never appears).
  const schedule u = from_torch_csv("0F0,0B0\n,\n2F0\n");
  CHECK(u.stages() == 3);
  CHECK(u.ops(1).empty());
}

TEST_CASE("torch csv: errors name row and column", "[io][torch_csv]") {
  CHECK(csv_error("0F0,0X0\n") ==
        "from_torch_csv: row 1, column 2: unknown action \"X\" in cell \"0X0\" (expected F, I, B, "
        "W, BW, SEND_F, RECV_F, SEND_B or RECV_B)");
  // Our recompute kind is not a PyTorch action: refused on import as on export.
  CHECK(csv_error("0F0,0R0,0B0\n") ==
        "from_torch_csv: row 1, column 2: unknown action \"R\" in cell \"0R0\" (expected F, I, B, "
        "W, BW, SEND_F, RECV_F, SEND_B or RECV_B)");
  CHECK(csv_error("0F0\n1F0,F1\n") ==
        "from_torch_csv: row 2, column 2: malformed cell \"F1\" (expected "
        "<stage><kind><microbatch>, e.g. 0F3)");
  CHECK(csv_error("0F0,,0F\n") ==
        "from_torch_csv: row 1, column 3: malformed cell \"0F\" (missing micro-batch)");
  CHECK(csv_error("0F0,0F99999999999\n") ==
        "from_torch_csv: row 1, column 2: malformed cell \"0F99999999999\" (expected "
        "<stage><kind><microbatch>, e.g. 0F3)");
  CHECK(csv_error("0F0,0I0,0BW1\n") ==
        "from_torch_csv: row 1, column 3: BW (older spelling) mixed with I (current spelling) at "
        "row 1, column 2");
  CHECK(csv_error("0F0,2F0\n1F0\n") ==
        "from_torch_csv: stage count (highest stage index + 1 = 3) must be a multiple of the rank "
        "count (2 rows)");
  CHECK(csv_error("0F0,1F0\n1B0\n") ==
        "from_torch_csv: row 2, column 1: stage 1 is on rank 0 (row 1) "
        "and on rank 1");
  CHECK(csv_error("") == "from_torch_csv: no rows (a PyTorch CSV has one row per rank)");
  CHECK(csv_error(",,\n") == "from_torch_csv: no actions (every cell is empty)");
  CHECK(csv_error("0F0,1F0\n3F0\n") ==
        "from_torch_csv: rank 1 (row 2) holds 1 stages, expected 2 (stages are neither loop- nor "
        "V-placed, so every rank must hold exactly 2 stage indices)");
}

TEST_CASE("torch csv: export of a deadlocked schedule fails with unit steps", "[io][torch_csv]") {
  schedule s = schedule::sequential("bad", 2, 1);
  s.stage_ops(0) = {make_op(op_kind::backward_full, 0), make_op(op_kind::forward, 0)};
  s.stage_ops(1) = {make_op(op_kind::forward, 0), make_op(op_kind::backward_full, 0)};
  CHECK_THROWS_WITH(to_torch_csv(s), Catch::StartsWith("to_torch_csv: the schedule cannot run"));
  CHECK(to_torch_csv(s, {torch_spelling::current, torch_alignment::list_order}) ==
        "0B0,0F0\n1F0,1B0\n");
}

TEST_CASE("torch csv: random input throws invalid_argument or parses", "[io][torch_csv]") {
  const std::string alphabet = "0123456789FIBWSEND_RCV,,,\n  \"";
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::size_t parsed = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const std::size_t n = next() % 40;
    for (std::size_t i = 0; i < n; ++i) {
      text += alphabet[next() % alphabet.size()];
    }
    try {
      const schedule s = from_torch_csv(text);
      ++parsed;
      CHECK(s.stages() >= 1);
      // Whatever was read exports in list order and reads back the same.
      CHECK(from_torch_csv(
                to_torch_csv(s, {torch_spelling::legacy, torch_alignment::list_order})) == s);
    } catch (const invalid_argument&) {
    }
  }
  CHECK(parsed > 0);
}

TEST_CASE("torch csv: golden 1F1B p=2 m=2 with comm, list order (PyTorch compute_comms)",
          "[io][torch_csv]") {
  const schedule s = lower_communication(generate(one_f_one_b{}, 2, 2));
  const std::string list =
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n";
  CHECK(to_torch_csv(s) == list);  // automatic: list order once there are SEND/RECV ops
  CHECK(to_torch_csv(s, {torch_spelling::current, torch_alignment::list_order}) == list);
  CHECK(to_torch_csv(s, {torch_spelling::legacy, torch_alignment::automatic}) ==
        "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0BW0,0RECV_B1,0BW1\n"
        "1RECV_F0,1F0,1RECV_F1,1BW0,1SEND_B0,1F1,1BW1,1SEND_B1\n");
  // The unit-step grid stays available (SEND/RECV pairs share a step).
  CHECK(to_torch_csv(s, {torch_spelling::current, torch_alignment::unit_steps}) ==
        "0F0,0SEND_F0,0F1,0SEND_F1,,0RECV_B0,0B0,,0RECV_B1,0B1\n"
        ",1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n");
}

TEST_CASE("torch csv: the checker catches what PyTorch's runtime would reject", "[io][torch_csv]") {
  // RECV_B posted after the backward that needs it.
  const action_file late_recv = read_actions(
      "0F0,0SEND_F0,0B0,0RECV_B0\n1RECV_F0,1F0,1B0,1SEND_B0\n", torch_spelling::current);
  CHECK_FALSE(blocking_dry_run(late_recv).empty());
  // Sends in one order, receives in the other: fine when buffered, a deadlock when blocking.
  const action_file crossed = read_actions(
      "0F0,0F1,0SEND_F0,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F1,1RECV_F0,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n",
      torch_spelling::current);
  CHECK(blocking_dry_run(crossed) == "rank 0 at 0SEND_F0; rank 1 at 1RECV_F1; ");
  const action_file ok = read_actions("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
                                      torch_spelling::current);
  CHECK(blocking_dry_run(ok).empty());
}

TEST_CASE(
    "torch csv: every registered schedule, both layouts and spellings, loads as PyTorch "
    "reads it",
    "[io][torch_csv]") {
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> sizes{{1, 2}, {2, 3}, {3, 5}, {4, 8}};
  std::size_t multi_chunk = 0;
  std::size_t split = 0;
  std::size_t pairs = 0;
  for (const generator_entry& e : default_registry().entries()) {
    for (const auto& [p, m] : sizes) {
      generator_params params;
      params.stages = p;
      params.microbatches = m;
      const auto generated = test_support::generate_if_served(e, params);
      if (!generated) {
        continue;
      }
      const schedule& compute = *generated;
      REQUIRE(validate(compute).ok());
      if (compute.layout().routes() > 1) {
        continue;  // not expressible in PyTorch's CSV (the refusal is tested below)
      }
      multi_chunk += compute.chunks() > 1 ? 1U : 0U;
      for (stage_index st = 0; st < compute.stages(); ++st) {
        for (const op& o : compute.ops(st)) {
          split += o.kind == op_kind::backward_weight ? 1U : 0U;
          pairs += overlaps_next(o) ? 1U : 0U;
        }
      }
      lowering_options late;
      late.receives = receive_placement::late;
      for (const schedule& s :
           {compute, lower_communication(compute), lower_communication(compute, late)}) {
        for (torch_spelling sp : {torch_spelling::current, torch_spelling::legacy}) {
          for (torch_alignment al : {torch_alignment::unit_steps, torch_alignment::list_order}) {
            INFO(e.name << " p=" << p << " m=" << m << (s.has_comm() ? " with comm" : "")
                        << (sp == torch_spelling::legacy ? " legacy" : " current")
                        << (al == torch_alignment::list_order ? " list" : " steps"));
            check_torch_file(s, {sp, al});
          }
          // The default: PyTorch's compute+comms form with SEND/RECV ops, else the grid.
          CHECK(to_torch_csv(s, {sp, torch_alignment::automatic}) ==
                to_torch_csv(s, {sp, s.has_comm() ? torch_alignment::list_order
                                                  : torch_alignment::unit_steps}));
        }
      }
    }
  }
  CHECK(multi_chunk > 0);  // loop and V placements were covered
  CHECK(split > 0);        // and B / W split backwards
  CHECK(pairs > 0);        // and overlapped F&B pairs (dualpipev)
}

namespace {

// PyTorch's golden ScheduleDualPipeV order, p = 4, m = 10
// (test/distributed/pipelining/artifacts/dualpipev_4rank_10mb.csv in pytorch/pytorch).
const std::string dualpipev_4rank_10mb =
    "0F0,0F1,0F2,0F3,0F4,0F5,0F6,7F0,7I0,7W0,7F1,7I1,7W1,7F2,7I2,7W2,7F3,(0F7;7B3)OVERLAP_F_B,"
    "(7F4;0B0)OVERLAP_F_B,(0F8;7B4)OVERLAP_F_B,(7F5;0B1)OVERLAP_F_B,(0F9;7B5)OVERLAP_F_B,(7F6;"
    "0B2)OVERLAP_F_B,7B6,(7F7;0B3)OVERLAP_F_B,7B7,(7F8;0B4)OVERLAP_F_B,7B8,(7F9;0B5)OVERLAP_F_B,"
    "7B9,0I6,0W6,0I7,0W7,0I8,0W8,0I9,0W9\n"
    "1F0,1F1,1F2,1F3,1F4,6F0,1F5,6F1,6I0,6W0,6F2,6I1,6W1,6F3,(1F6;6B2)OVERLAP_F_B,(6F4;1B0)"
    "OVERLAP_F_B,(1F7;6B3)OVERLAP_F_B,(6F5;1B1)OVERLAP_F_B,(1F8;6B4)OVERLAP_F_B,(6F6;1B2)OVERLAP_"
    "F_B,(1F9;6B5)OVERLAP_F_B,(6F7;1B3)OVERLAP_F_B,6B6,(6F8;1B4)OVERLAP_F_B,6B7,(6F9;1B5)OVERLAP_"
    "F_B,6B8,1B6,6I9,1I7,6W9,1I8,1W7,1I9,1W8,1W9\n"
    "2F0,2F1,2F2,5F0,2F3,5F1,2F4,5F2,5I0,5W0,5F3,(2F5;5B1)OVERLAP_F_B,(5F4;2B0)OVERLAP_F_B,(2F6;"
    "5B2)OVERLAP_F_B,(5F5;2B1)OVERLAP_F_B,(2F7;5B3)OVERLAP_F_B,(5F6;2B2)OVERLAP_F_B,(2F8;5B4)"
    "OVERLAP_F_B,(5F7;2B3)OVERLAP_F_B,(2F9;5B5)OVERLAP_F_B,(5F8;2B4)OVERLAP_F_B,5B6,(5F9;2B5)"
    "OVERLAP_F_B,5B7,2B6,5B8,2I7,5I9,2I8,2W7,2I9,5W9,2W8,2W9\n"
    "3F0,4F0,3F1,4F1,3F2,4F2,3F3,4F3,3F4,4B0,(4F4;3B0)OVERLAP_F_B,(3F5;4B1)OVERLAP_F_B,(4F5;3B1)"
    "OVERLAP_F_B,(3F6;4B2)OVERLAP_F_B,(4F6;3B2)OVERLAP_F_B,(3F7;4B3)OVERLAP_F_B,(4F7;3B3)OVERLAP_"
    "F_B,(3F8;4B4)OVERLAP_F_B,(4F8;3B4)OVERLAP_F_B,(3F9;4B5)OVERLAP_F_B,(4F9;3B5)OVERLAP_F_B,4B6,"
    "3B6,4B7,3B7,4I8,3I8,4I9,3I9,4W8,3W8,4W9,3W9\n";

}  // namespace

TEST_CASE("torch csv: (...;...)OVERLAP_F_B reads as an overlapped pair and writes back",
          "[io][torch_csv][overlap]") {
  const schedule s = from_torch_csv(dualpipev_4rank_10mb, "dualpipev");
  REQUIRE(s.stages() == 4);
  CHECK(s.microbatches() == 10);
  CHECK(s.layout().kind() == placement_kind::v_shape);
  // Row 1: ... 7F3, (0F7;7B3)OVERLAP_F_B: F7 of chunk 0 marked, then BW3 of chunk 1 (stage 7).
  const auto ops = s.ops(0);
  CHECK(ops[16] == make_op(op_kind::forward, 3, 1));
  CHECK(ops[17] == overlapping_next(make_op(op_kind::forward, 7, 0)));
  CHECK(ops[18] == make_op(op_kind::backward_full, 3, 1));
  CHECK(ops[19] == overlapping_next(make_op(op_kind::forward, 4, 1)));
  CHECK(ops[20] == make_op(op_kind::backward_full, 0, 0));
  // PyTorch's order is valid under the pair rules, and runs.
  const validation_report r = validate(s);
  INFO((r.violations.empty() ? std::string() : r.violations[0].message));
  CHECK(r.ok());
  // Written back in list order, the same text; in unit steps a pair fills one cell.
  CHECK(to_torch_csv(s, {torch_spelling::current, torch_alignment::list_order}) ==
        dualpipev_4rank_10mb);
  for (torch_alignment al : {torch_alignment::unit_steps, torch_alignment::list_order}) {
    for (torch_spelling sp : {torch_spelling::current, torch_spelling::legacy}) {
      const schedule back = from_torch_csv(to_torch_csv(s, {sp, al}), "dualpipev");
      CHECK(back == s);
    }
  }
  schedule tiny = schedule::sequential("t", 2, 3);
  tiny.stage_ops(0) = {make_op(op_kind::forward, 0),
                       make_op(op_kind::forward, 1),
                       overlapping_next(make_op(op_kind::forward, 2)),
                       make_op(op_kind::backward_full, 0),
                       make_op(op_kind::backward_full, 1),
                       make_op(op_kind::backward_full, 2)};
  tiny.stage_ops(1) = {
      make_op(op_kind::forward, 0),       overlapping_next(make_op(op_kind::forward, 1)),
      make_op(op_kind::backward_full, 0), make_op(op_kind::forward, 2),
      make_op(op_kind::backward_full, 1), make_op(op_kind::backward_full, 2)};
  // Unit steps: the pair is one slot of two steps (T_F + T_B, no gain) in one cell.
  // Stage 1's pair ends at step 4, stage 0's waits for it (its B0 needs stage 1's).
  CHECK(to_torch_csv(tiny) ==
        "0F0,0F1,,,(0F2;0B0)OVERLAP_F_B,,,,0B1,0B2\n"
        ",1F0,(1F1;1B0)OVERLAP_F_B,,,,1F2,1B1,1B2\n");
  CHECK(from_torch_csv(to_torch_csv(tiny), "t") == tiny);
}

TEST_CASE("torch csv: malformed overlapped pairs name row and column", "[io][torch_csv][overlap]") {
  CHECK(csv_error("0F0,(0F1;0B0;0F2)OVERLAP_F_B\n") ==
        "from_torch_csv: row 1, column 2: malformed cell \"(0F1;0B0;0F2)OVERLAP_F_B\" (expected "
        "an overlapped pair (<action>;<action>)OVERLAP_F_B, e.g. (0F7;7B3)OVERLAP_F_B)");
  CHECK(csv_error("(0F1;0B0)OVERLAP\n") ==
        "from_torch_csv: row 1, column 1: malformed cell \"(0F1;0B0)OVERLAP\" (expected an "
        "overlapped pair (<action>;<action>)OVERLAP_F_B, e.g. (0F7;7B3)OVERLAP_F_B)");
  CHECK(csv_error("(0F1;0X0)OVERLAP_F_B\n") ==
        "from_torch_csv: row 1, column 1: unknown action \"X\" in cell \"(0F1;0X0)OVERLAP_F_B\" "
        "(expected F, I, B, W, BW, SEND_F, RECV_F, SEND_B or RECV_B)");
  CHECK(csv_error("(0F1;0UNSHARD)OVERLAP_F_B\n") ==
        "from_torch_csv: row 1, column 1: cell \"(0F1;0UNSHARD)OVERLAP_F_B\": an overlapped pair "
        "holds two compute actions");
}

TEST_CASE("torch csv: to_torch_actions gives the CSV's cells per rank", "[io][torch_csv]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  using rows = std::vector<std::vector<std::string>>;
  CHECK(to_torch_actions(s) ==
        rows{{"0F0", "0F1", "", "0B0", "", "0B1"}, {"", "1F0", "1B0", "1F1", "1B1"}});
  CHECK(to_torch_actions(s, {torch_spelling::legacy, torch_alignment::list_order}) ==
        rows{{"0F0", "0F1", "0BW0", "0BW1"}, {"1F0", "1BW0", "1F1", "1BW1"}});
  schedule pair = schedule::sequential("t", 2, 3);
  pair.stage_ops(0) = {make_op(op_kind::forward, 0),
                       make_op(op_kind::forward, 1),
                       overlapping_next(make_op(op_kind::forward, 2)),
                       make_op(op_kind::backward_full, 0),
                       make_op(op_kind::backward_full, 1),
                       make_op(op_kind::backward_full, 2)};
  CHECK(to_torch_actions(pair, {torch_spelling::current, torch_alignment::list_order})[0] ==
        std::vector<std::string>{"0F0", "0F1", "(0F2;0B0)OVERLAP_F_B", "0B1", "0B2"});
  // Joined by commas, one line per rank: the CSV.
  auto joined = [](const rows& r) {
    std::string out;
    for (const auto& cells : r) {
      for (std::size_t c = 0; c < cells.size(); ++c) {
        out += (c == 0 ? "" : ",") + cells[c];
      }
      out += '\n';
    }
    return out;
  };
  const schedule zb = generate(zb_h1{}, 4, 8);
  for (torch_alignment al : {torch_alignment::unit_steps, torch_alignment::list_order}) {
    CHECK(joined(to_torch_actions(zb, {torch_spelling::current, al})) ==
          to_torch_csv(zb, {torch_spelling::current, al}));
  }
  const torch_csv_options list{torch_spelling::current, torch_alignment::list_order};
  CHECK(joined(to_torch_actions(pair, list)) == to_torch_csv(pair, list));
}

TEST_CASE("to_torch_csv refuses a schedule with two routes, saying why",
          "[io][torch_csv][routes]") {
  const schedule d = generate(dualpipe{}, 4, 8);
  CHECK_THROWS_WITH(
      to_torch_csv(d),
      "to_torch_csv: schedule \"dualpipe\" has 2 routes (placement dual): PyTorch's schedule CSV "
      "names one chain of stages that every micro-batch runs through from stage 0, so it cannot "
      "say that a micro-batch enters at another stage (docs/formats.md); write the schedule JSON "
      "instead");
}
