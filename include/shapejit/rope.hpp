// shapejit C++ API: rope (declarations come with the rope operation).
#pragma once

#include "shapejit/core.hpp"
