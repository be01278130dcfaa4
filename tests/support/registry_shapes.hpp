#pragma once

// Registry-wide tests run every registered generator over grids of (p, m). A generator may refuse
// a shape in range only by a rule it documents (docs/errors.md, "Shape rules"); this table holds
// those rules, so a test skips exactly the refused shapes, checks that the refusal names the
// rule, and fails on anything else a generator throws.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>

#include <pipesched/gen/registry.hpp>

namespace test_support {

/// A documented shape rule: `serves(p, m)` is false exactly when the generator named
/// `generator` throws invalid_argument with a message containing `message`.
struct shape_rule {
  std::string_view generator;
  std::string_view message;
  bool (*serves)(std::uint32_t p, std::uint32_t m);
};

inline constexpr shape_rule shape_rules[] = {
    {"dualpipev", "must be at least 2*stages",
     [](std::uint32_t p, std::uint32_t m) { return std::uint64_t{m} >= 2 * std::uint64_t{p}; }},
    {"dualpipe", "must be even",
     [](std::uint32_t p, std::uint32_t m) {
       return p % 2 == 0 && m % 2 == 0 && std::uint64_t{m} >= 2 * std::uint64_t{p};
     }},
};

/// The documented shape rule of the generator `name`, or nullptr when it serves every shape.
inline const shape_rule* shape_rule_of(std::string_view name) {
  for (const shape_rule& r : shape_rules) {
    if (r.generator == name) {
      return &r;
    }
  }
  return nullptr;
}

/// Whether the generator `name` serves (p, m) by its documented rule.
inline bool serves(std::string_view name, std::uint32_t p, std::uint32_t m) {
  const shape_rule* r = shape_rule_of(name);
  return r == nullptr || r->serves(p, m);
}

/// e's schedule for gp, or std::nullopt when e's documented rule refuses gp's shape, after
/// checking that e refuses it with the rule's message. Whatever else the generator throws
/// propagates: the test fails.
inline std::optional<pipesched::schedule> generate_if_served(
    const pipesched::generator_entry& e, const pipesched::generator_params& gp) {
  if (serves(e.name, gp.stages, gp.microbatches)) {
    return e.generate(gp);
  }
  std::string what = "(no exception)";
  try {
    (void)e.generate(gp);
  } catch (const pipesched::invalid_argument& err) {
    what = err.what();
  }
  INFO(e.name << " p=" << gp.stages << " m=" << gp.microbatches << ": " << what);
  CHECK(what.find(shape_rule_of(e.name)->message) != std::string::npos);
  return std::nullopt;
}

}  // namespace test_support
