// shapejit C++ API: rearrange (declarations come with the rearrange operation).
#pragma once

#include "shapejit/core.hpp"
