#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/gpipe.hpp"
#include "pipesched/gen/interleaved.hpp"
#include "pipesched/gen/one_f_one_b.hpp"
#include "pipesched/gen/zb_auto.hpp"
#include "pipesched/gen/zb_v.hpp"
#include "pipesched/gen/zero_bubble.hpp"

namespace pipesched {

/// A generator reachable by name (CLI, file formats, plugins).
struct generator_entry {
  std::string name;                  ///< e.g. "zb-h1"
  std::string description;           ///< one line, for `pipesched list`
  std::uint32_t default_chunks = 1;  ///< chunks per stage when generator_params::chunks is 0
  std::function<schedule(const generator_params&)> generate;
};

/// Name -> generator. Holds type-erased copies of schedule_generator models.
class generator_registry {
 public:
  /// Registers a generator under g.name(). Replaces an entry of the same name.
  template <schedule_generator G>
  generator_registry& add(G g, std::string description, std::uint32_t default_chunks = 1) {
    return add_as(std::string(g.name()), std::move(g), std::move(description), default_chunks);
  }

  /// Registers a generator under another name (aliases such as zb-1p).
  template <schedule_generator G>
  generator_registry& add_as(std::string name,
                             G g,
                             std::string description,
                             std::uint32_t default_chunks = 1) {
    generator_entry e{std::move(name), std::move(description), default_chunks,
                      [g = std::move(g)](const generator_params& p) { return g.generate(p); }};
    for (auto& old : entries_) {
      if (old.name == e.name) {
        old = std::move(e);
        return *this;
      }
    }
    entries_.push_back(std::move(e));
    return *this;
  }

  /// nullptr when no generator has that name.
  const generator_entry* find(std::string_view name) const noexcept {
    for (const auto& e : entries_) {
      if (e.name == name) {
        return &e;
      }
    }
    return nullptr;
  }

  /// Throws invalid_argument listing the known names when `name` is unknown.
  const generator_entry& at(std::string_view name) const {
    if (const auto* e = find(name)) {
      return *e;
    }
    std::string known;
    for (const auto& e : entries_) {
      known += known.empty() ? "" : ", ";
      known += e.name;
    }
    detail::fail("unknown schedule \"", name, "\" (known: ", known, ")");
  }

  schedule generate(std::string_view name, const generator_params& params) const {
    return at(name).generate(params);
  }

  std::span<const generator_entry> entries() const noexcept { return entries_; }

 private:
  std::vector<generator_entry> entries_;
};

namespace detail {
inline generator_registry make_default_registry() {
  generator_registry r;
  r.add(gpipe{}, "GPipe: all forwards, then all fused backwards; peak memory m*M_B");
  r.add(gpipe{true}, "GPipe with split backward (B then W at once), for comparison");
  r.add(one_f_one_b{}, "1F1B: warm-up forwards, then one forward one backward; peak p*M_B");
  r.add(one_f_one_b{true}, "1F1B with split backward (B then W at once), for comparison");
  r.add(zb_h1{}, "ZB-H1: zero-bubble handcrafted, 1F1B memory, bubble (p-1)(TF+TB-TW)");
  r.add(zb_h2{}, "ZB-H2: zero-bubble handcrafted, (2p-1)*M_B memory, no bubble at equal costs");
  r.add(interleaved_1f1b{},
        "Interleaved 1F1B (Megatron virtual pipeline): v chunks per stage, bubble 1/v of 1F1B's",
        2);
  r.add(zb_v{}, "ZB-V: V placement, 2 chunks, cost-aware greedy; 1F1B memory, zero bubble", 2);
  r.add(zb_auto{},
        "ZB automatic: memory-bounded greedy search (memory_limit, default p*M_B) + bound");
  r.add(zb_auto{zb_memory_preset::one_p}, "ZB-1p: automatic zero-bubble with limit p*M_B");
  r.add(zb_auto{zb_memory_preset::two_p}, "ZB-2p: automatic zero-bubble with limit 2p*M_B");
  return r;
}
}  // namespace detail

/// The built-in generators, by name.
inline const generator_registry& default_registry() {
  static const generator_registry r = detail::make_default_registry();
  return r;
}

}  // namespace pipesched
