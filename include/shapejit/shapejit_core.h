/* shapejit C API, core part: status codes, element types, tensor descriptors, errors, options.
 * Include <shapejit/shapejit.h>, which includes this and every operation. */
#ifndef SHAPEJIT_CORE_H
#define SHAPEJIT_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Status of every C call; the values match shapejit::ErrorCode. On failure, sj_last_error() says why. */
typedef enum sj_status {
  SJ_OK = 0,
  SJ_INVALID_ARGUMENT = 1,
  SJ_UNSUPPORTED = 2,
  SJ_COMPILE_FAILED = 3,
  SJ_NVRTC_UNAVAILABLE = 4,
  SJ_DRIVER_UNAVAILABLE = 5,
  SJ_DRIVER_ERROR = 6,
  SJ_OFFLINE_MISS = 7,
  SJ_IO_ERROR = 8,
  SJ_INTERNAL = 9
} sj_status;

/** Element types; the values match shapejit::DType. */
typedef enum sj_dtype {
  SJ_U8 = 0, SJ_I8, SJ_U16, SJ_I16, SJ_U32, SJ_I32, SJ_U64, SJ_I64, SJ_F16, SJ_BF16, SJ_F32, SJ_F64
} sj_dtype;

/** A strided device tensor view. `strides` may be NULL (row-major contiguous); both arrays hold
 *  `rank` values, strides counted in elements. `elem_bytes` > 0 overrides the dtype's size
 *  (rearrange only: opaque elements of 1 to 64 bytes). */
typedef struct sj_tensor_desc {
  int rank;
  const int64_t* shape;
  const int64_t* strides;
  sj_dtype dtype;
  int elem_bytes;
} sj_tensor_desc;

/** The message of the last failed call on this thread ("" if none). Valid until the next call. */
const char* sj_last_error(void);

/** Plans a manifest line (the arguments of `shapejit plan`, e.g. "rearrange --dtype f16 --shape
 *  8,4 --perm 1,0") and writes its description (JSON when `json` is nonzero), NUL-terminated, into
 *  `buffer` of `capacity` bytes. `*length` (when not NULL) receives the description's length
 *  without the NUL; a buffer too small (or NULL with capacity 0) is SJ_INVALID_ARGUMENT with
 *  `*length` set, so a caller can ask for the size first. */
sj_status sj_describe_manifest_line(const char* line, int json, char* buffer, size_t capacity, size_t* length);

/** Library version string. */
const char* sj_version(void);

/** Forbid (nonzero) or allow (0) NVRTC in this process; a cache miss then fails with SJ_OFFLINE_MISS. */
void sj_set_offline(int offline);

/** Start record mode (append the manifest line of every plan needing kernels not yet recorded to
 *  the file at `path`, as SHAPEJIT_RECORD does at start); NULL or "" stops it. */
void sj_set_record_file(const char* path);

#ifdef __cplusplus
}
#endif

#endif /* SHAPEJIT_CORE_H */
