#pragma once

#include "pipesched/gen/registry.hpp"

// The built-in generators by name. Apart from gen/registry.hpp (the registry type alone) because
// naming every generator pulls in all of them, the automatic search and its threads included,
// and compiling them takes seconds in every translation unit that calls these functions.
// Linking the compiled pipesched::registry (CMake; it defines PIPESCHED_REGISTRY_COMPILED for
// its users) makes this header declare them only: they are compiled once, in that library.
// Define the macro in every translation unit of a program or in none.

#ifndef PIPESCHED_REGISTRY_COMPILED
#include "pipesched/gen/detail/builtin_generators.hpp"
#endif

namespace pipesched {

#ifdef PIPESCHED_REGISTRY_COMPILED
// Other names (the inline namespace) than the header-only functions: a translation unit
// without the macro defines its own inline ones, never a second definition of these.
inline namespace compiled_registry {
generator_registry builtin_registry();
const generator_registry& default_registry();
}  // namespace compiled_registry
#else
/// A new registry holding the built-in generators, to extend with your own
/// (`auto r = builtin_registry(); r.add(my_generator{}, "one line");`) or to replace one of
/// them under its name. default_registry() is an immutable one of these, safe to share.
inline generator_registry builtin_registry() {
  generator_registry r;
  detail::add_builtin_generators(r);
  return r;
}

/// The built-in generators, by name (read-only; builtin_registry() gives a copy to extend).
inline const generator_registry& default_registry() {
  static const generator_registry r = builtin_registry();
  return r;
}
#endif

}  // namespace pipesched
