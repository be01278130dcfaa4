#pragma once

namespace fixture::detail {
struct d {};
}  // namespace fixture::detail
