#pragma once

#include "pipesched/gen/registry.hpp"
#include "pipesched/ir/detail/linkage.hpp"

// The built-in generators by name. Apart from gen/registry.hpp (the registry type alone) because
// naming every generator pulls in all of them, the automatic search and its threads included.
// Compiled once in the library (ir/detail/linkage.hpp): this header declares them, and pulls in
// the generators only with PIPESCHED_HEADER_ONLY.

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_REGISTRY)
#include "pipesched/gen/detail/builtin_generators.hpp"
#endif

namespace pipesched {

/// A new registry holding the built-in generators, to extend with your own
/// (`auto r = builtin_registry(); r.add(my_generator{}, "one line");`) or to replace one of
/// them under its name. default_registry() is an immutable one of these, safe to share.
PIPESCHED_INLINE generator_registry builtin_registry();

/// The built-in generators, by name (read-only; builtin_registry() gives a copy to extend).
PIPESCHED_INLINE const generator_registry& default_registry();

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_REGISTRY)
PIPESCHED_INLINE generator_registry builtin_registry() {
  generator_registry r;
  detail::add_builtin_generators(r);
  return r;
}

PIPESCHED_INLINE const generator_registry& default_registry() {
  static const generator_registry r = builtin_registry();
  return r;
}
#endif

}  // namespace pipesched
