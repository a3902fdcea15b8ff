#include "core/spec.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace shapejit::spec_detail {

std::uint64_t hash64(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace shapejit::spec_detail
