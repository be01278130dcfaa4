#include <cstddef>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/ir/stage_table.hpp>

using namespace pipesched;

TEST_CASE("stage_table: per-stage lists in one block", "[ir][stage_table]") {
  const std::vector<std::size_t> sizes = {2, 0, 3};
  stage_table<int> t(sizes);
  REQUIRE(t.size() == 3);
  CHECK_FALSE(t.empty());
  CHECK(t.total() == 5);
  CHECK(t[0].size() == 2);
  CHECK(t[1].empty());
  CHECK(t[2].size() == 3);
  CHECK(t[2][0] == 0);  // value-initialised
  t[0][1] = 7;
  t[2][2] = 9;
  // One block, stages in order, a cache line (16 ints) at most between two stages' lists.
  CHECK(t[1].data() >= t[0].data() + 2);
  CHECK(t[2].data() >= t[1].data());
  CHECK(t[2].data() <= t[0].data() + 2 + 2 * 16);
  std::vector<std::size_t> seen;
  for (const std::span<const int> l : t) {
    seen.push_back(l.size());
  }
  CHECK(seen == sizes);
  CHECK(t.to_vectors() == std::vector<std::vector<int>>{{0, 7}, {}, {0, 0, 9}});
  CHECK(stage_table<int>(t.to_vectors()) == t);
}

TEST_CASE("stage_table: truncate keeps a prefix; equality compares the lists",
          "[ir][stage_table]") {
  stage_table<int> t(std::vector<std::vector<int>>{{1, 2, 3}, {4}});
  const int* before = t[0].data();
  t.truncate(0, 1);
  CHECK(t[0].size() == 1);
  CHECK(t[0].data() == before);
  CHECK(t[1][0] == 4);
  CHECK(t == stage_table<int>(std::vector<std::vector<int>>{{1}, {4}}));
  CHECK_FALSE(t == stage_table<int>(std::vector<std::vector<int>>{{1}, {5}}));
  CHECK_FALSE(t == stage_table<int>(std::vector<std::vector<int>>{{1}}));
  CHECK_FALSE(t == stage_table<int>(std::vector<std::vector<int>>{{1, 2}, {4}}));
  CHECK_THROWS_WITH(t.truncate(0, 2),
                    Catch::Matchers::Contains("truncate(0, 2) past stage 0's 1 elements"));
  CHECK_THROWS_AS(t.truncate(5, 0), invalid_argument);
  CHECK(stage_table<int>().empty());
  CHECK(stage_table<int>() == stage_table<int>(std::vector<std::vector<int>>{}));
}

TEST_CASE("stage_table: reset_for_overwrite gives the shape; written lists read back",
          "[ir][stage_table]") {
  const std::vector<std::size_t> sizes = {3, 1, 2};
  stage_table<int> t(std::vector<std::vector<int>>{{5}});
  t.reset_for_overwrite(sizes);
  REQUIRE(t.size() == 3);
  CHECK(t.total() == 6);
  CHECK(t[1].data() >= t[0].data() + 3);
  CHECK(t[2].data() >= t[1].data() + 1);
  // Stage 0 wrote its whole list, stage 1 none, stage 2 a prefix of one (a deadlock's rows).
  for (int i = 0; i < 3; ++i) {
    t[0][static_cast<std::size_t>(i)] = 10 + i;
  }
  t[2][0] = 30;
  t.truncate(1, 0);
  t.truncate(2, 1);
  CHECK(t.to_vectors() == std::vector<std::vector<int>>{{10, 11, 12}, {}, {30}});
  // truncate value-initialises what it drops: a copy reads only written elements.
  CHECK(t.to_vectors() == stage_table<int>(t).to_vectors());
  CHECK(t[2].data()[1] == 0);
  CHECK(t[1].data()[0] == 0);
  CHECK(t[0].data()[3] == 0);  // the gap after stage 0's list
}
