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
  // One block: stage s + 1 starts where stage s's room ends.
  CHECK(t[2].data() == t[0].data() + 2);
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
