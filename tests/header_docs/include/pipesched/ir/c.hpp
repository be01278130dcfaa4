#pragma once

namespace fixture {
struct c {};
}  // namespace fixture
