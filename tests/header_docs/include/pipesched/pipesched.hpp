#pragma once

// A drifted umbrella for cmake/check_header_docs.cmake: ir/c.hpp is neither included nor listed,
// and the list names ir/gone.hpp, which does not exist.
//
// Not included:
//   ir/b.hpp ir/gone.hpp

#include "pipesched/ir/a.hpp"
