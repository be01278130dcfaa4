#pragma once
// Fixture for 'headers: layer check rejects an upward include': ir/ may not include gen/.
#include "pipesched/gen/registry.hpp"
