#pragma once

// Uses std::vector without including <vector>: the self-containment check must reject it.
inline int first_of_two() {
  return std::vector<int>{1, 2}.front();
}
