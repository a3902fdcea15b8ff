/* shapejit C API: rearrange (declarations come with the rearrange operation). */
#ifndef SHAPEJIT_REARRANGE_H
#define SHAPEJIT_REARRANGE_H

#include "shapejit/shapejit_core.h"

#endif
