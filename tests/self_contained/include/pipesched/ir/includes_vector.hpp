#pragma once

// The same with its include: the check must accept it.
#include <vector>

inline int first_of_two() {
  return std::vector<int>{1, 2}.front();
}
