#pragma once

namespace fixture {
struct a {};
}  // namespace fixture
