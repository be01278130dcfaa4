#pragma once

// Kept so that existing includes compile: the header is tools/analyze.hpp.

#include "pipesched/tools/analyze.hpp"
