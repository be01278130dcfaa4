#include <string>

#include <catch2/catch.hpp>

#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/validate/validator.hpp>

using namespace pipesched;

namespace {

// GPipe-like order over all chunks of a two-chunk placement: every F, then every BW in reverse
// chunk order; valid for loop and V placements.
schedule two_chunk(const placement& pl, std::uint32_t m, bool split) {
  schedule s("two-chunk", m, pl);
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

std::string error_of(const std::string& csv) {
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
  CHECK(error_of("0F0,0X0\n") ==
        "from_torch_csv: row 1, column 2: unknown action \"X\" in cell \"0X0\" (expected F, I, B, "
        "W, BW, SEND_F, RECV_F, SEND_B or RECV_B)");
  CHECK(error_of("0F0\n1F0,F1\n") ==
        "from_torch_csv: row 2, column 2: malformed cell \"F1\" (expected "
        "<stage><kind><microbatch>, e.g. 0F3)");
  CHECK(error_of("0F0,,0F\n") ==
        "from_torch_csv: row 1, column 3: malformed cell \"0F\" (missing micro-batch)");
  CHECK(error_of("0F0,0F99999999999\n") ==
        "from_torch_csv: row 1, column 2: malformed cell \"0F99999999999\" (expected "
        "<stage><kind><microbatch>, e.g. 0F3)");
  CHECK(error_of("0F0,0I0,0BW1\n") ==
        "from_torch_csv: row 1, column 3: BW (older spelling) mixed with I (current spelling) at "
        "row 1, column 2");
  CHECK(error_of("0F0,2F0\n1F0\n") ==
        "from_torch_csv: stage count (highest stage index + 1 = 3) must be a multiple of the rank "
        "count (2 rows)");
  CHECK(error_of("0F0,1F0\n1B0\n") ==
        "from_torch_csv: row 2, column 1: stage 1 is on rank 0 (row 1) "
        "and on rank 1");
  CHECK(error_of("") == "from_torch_csv: no rows (a PyTorch CSV has one row per rank)");
  CHECK(error_of(",,\n") == "from_torch_csv: no actions (every cell is empty)");
  CHECK(error_of("0F0,1F0\n3F0\n") ==
        "from_torch_csv: rank 1 (row 2) holds 1 stages, expected 2 (stages are neither loop- nor "
        "V-placed, so every rank must hold exactly 2 stage indices)");
}

TEST_CASE("torch csv: export of a deadlocked schedule fails with unit steps", "[io][torch_csv]") {
  schedule s("bad", 2, 1);
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
