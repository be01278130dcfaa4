#pragma once

// Kept so that existing includes compile: the header is tools/request.hpp.

#include "pipesched/tools/request.hpp"
