#pragma once

namespace fixture {
struct b {};
}  // namespace fixture
