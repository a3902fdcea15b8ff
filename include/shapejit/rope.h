/* shapejit C API: rope (declarations come with the rope operation). */
#ifndef SHAPEJIT_ROPE_H
#define SHAPEJIT_ROPE_H

#include "shapejit/shapejit_core.h"

#endif
