#include <atomic>
#include <stdexcept>

#include <catch2/catch.hpp>

#include <pipesched/ir/detail/parallel.hpp>

using namespace pipesched;

TEST_CASE("run_parallel: every worker runs, the caller included", "[gen][parallel]") {
  for (const unsigned threads : {1u, 2u, 4u}) {
    std::atomic<unsigned> ran{0};
    std::atomic<unsigned> stops{0};
    detail::run_parallel(
        threads, [&] { ++ran; }, [&] { ++stops; });
    CHECK(ran == threads);
    CHECK(stops == 0);
  }
}

TEST_CASE("run_parallel: the first exception stops the others and is rethrown", "[gen][parallel]") {
  std::atomic<bool> stop{false};
  std::atomic<unsigned> thrown{0};
  auto work = [&] {
    if (thrown++ == 0) {
      throw std::runtime_error("first");
    }
    while (!stop) {  // a worker that runs until told to stop: must be released, not hang
    }
  };
  CHECK_THROWS_WITH(detail::run_parallel(3, work, [&] { stop = true; }), "first");
  CHECK(stop);
}
