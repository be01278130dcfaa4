#pragma once

// Kept so that existing includes compile: the header is tools/whatif.hpp.

#include "pipesched/tools/whatif.hpp"
