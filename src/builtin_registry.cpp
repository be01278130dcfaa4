// pipesched::registry: the built-in generators and generator_entry::generate_result's work
// compiled once. Its users see only their declarations in gen/builtin_registry.hpp and
// gen/registry.hpp (PIPESCHED_REGISTRY_COMPILED, a PUBLIC definition of the CMake target, so
// defined here too).
#include "pipesched/gen/builtin_registry.hpp"

#include "pipesched/gen/detail/builtin_generators.hpp"

namespace pipesched {
inline namespace compiled_registry {

generator_registry builtin_registry() {
  generator_registry r;
  detail::add_builtin_generators(r);
  return r;
}

const generator_registry& default_registry() {
  static const generator_registry r = builtin_registry();
  return r;
}

}  // namespace compiled_registry

namespace detail {
inline namespace compiled_registry {

generation_result generate_result_of(const generator_entry& e,
                                     const generator_params& params,
                                     const generation_options& opts) {
  return generate_result_here(e, params, opts);
}

}  // namespace compiled_registry
}  // namespace detail
}  // namespace pipesched
