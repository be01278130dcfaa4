#include <catch2/catch.hpp>

#include <pipesched/gen/registry.hpp>

using namespace pipesched;

TEST_CASE("the default registry knows the built-in schedules", "[gen][registry]") {
  const auto& r = default_registry();
  for (const char* n : {"gpipe", "gpipe-split", "1f1b", "1f1b-split", "zb-h1", "zb-h2"}) {
    INFO(n);
    REQUIRE(r.find(n) != nullptr);
    CHECK_FALSE(r.at(n).description.empty());
  }
  CHECK(r.find("nope") == nullptr);
  CHECK_THROWS_WITH(r.at("nope"), Catch::StartsWith("unknown schedule \"nope\" (known: gpipe,"));
  generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  CHECK(r.generate("zb-h1", p) == generate(zb_h1{}, 4, 8));
}

TEST_CASE("registries accept user generators and aliases", "[gen][registry]") {
  generator_registry r;
  r.add(zb_h1{}, "h1");
  r.add_as("alias", zb_h2{}, "h2 by another name");
  REQUIRE(r.entries().size() == 2);
  generator_params p;
  p.stages = 2;
  p.microbatches = 3;
  CHECK(r.generate("alias", p).name() == "zb-h2");
  r.add(zb_h1{}, "replaced");
  CHECK(r.entries().size() == 2);
  CHECK(r.at("zb-h1").description == "replaced");
}
