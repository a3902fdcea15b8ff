/* Compiled as C: the public headers are valid C, and the C API plans, describes and reports
 * errors on a machine without a GPU. */
#include <shapejit/shapejit.h>
#include <string.h>

/* 0 when every check holds, else the number of the first check that failed. */
int shapejit_c_api_check(void) {
  const int64_t shape[2] = {64, 32};
  const int64_t transposed[2] = {1, 64};
  const sj_tensor_desc src = {2, shape, transposed, SJ_F32, 0};
  const sj_tensor_desc dst = {2, shape, NULL, SJ_F32, 0};
  sj_rearrange_plan plan = NULL;
  if (sj_rearrange_plan_create(&plan, &dst, &src, NULL) != SJ_OK || plan == NULL) return 1;
  const char* text = sj_rearrange_plan_describe(plan);
  if (text == NULL || strstr(text, "transpose") == NULL) return 2;
  if (sj_rearrange_plan_destroy(plan) != SJ_OK) return 3;

  const sj_rearrange_options checked = {0, 16, 1, 0};
  if (sj_rearrange_plan_create(&plan, &dst, &src, &checked) != SJ_OK || plan == NULL) return 8;
  text = sj_rearrange_plan_describe(plan);
  if (text == NULL || strstr(text, "pointers checked") == NULL) return 9;
  if (sj_rearrange_plan_destroy(plan) != SJ_OK) return 10;

  const int64_t other_shape[2] = {64, 33};
  const sj_tensor_desc mismatched = {2, other_shape, NULL, SJ_F32, 0};
  if (sj_rearrange_plan_create(&plan, &mismatched, &src, NULL) != SJ_INVALID_ARGUMENT || plan != NULL) return 4;
  if (strstr(sj_last_error(), "shape") == NULL) return 5;

  sj_rope_plan rope = NULL;
  if (sj_rope_plan_create(&rope, NULL) != SJ_INVALID_ARGUMENT || rope != NULL) return 6;
  if (sj_rope_plan_destroy(NULL) != SJ_OK) return 7;
  const int64_t x_shape[4] = {2, 8, 8, 64};
  const int64_t table_shape[2] = {16, 32};
  const sj_rope_desc desc = {.style = SJ_ROPE_NEOX,
                             .x = {4, x_shape, NULL, SJ_BF16, 0},
                             .table = {2, table_shape, NULL, SJ_F32, 0},
                             .hadamard_group = 4,
                             .hadamard_order = (sj_hadamard_order)2};
  if (sj_rope_plan_create(&rope, &desc) != SJ_INVALID_ARGUMENT || rope != NULL) return 11;
  if (strstr(sj_last_error(), "desc.hadamard_order is 2") == NULL) return 12;
  const int64_t q_scale_shape[3] = {2, 8, 2};
  const sj_rope_desc quantized = {.style = SJ_ROPE_NEOX,
                                  .x = {4, x_shape, NULL, SJ_BF16, 0},
                                  .table = {2, table_shape, NULL, SJ_F32, 0},
                                  .hadamard_group = 4,
                                  .q_quantize = SJ_QUANTIZE_INT8,
                                  .k_quantize = (sj_rope_quantize)3,
                                  .q_scale = {3, q_scale_shape, NULL, SJ_F32, 0}};
  if (sj_rope_plan_create(&rope, &quantized) != SJ_INVALID_ARGUMENT || rope != NULL) return 13;
  if (strstr(sj_last_error(), "desc.k_quantize is 3") == NULL) return 14;
  const sj_rope_pointers pointers = {.q_scale = NULL, .k_scale = NULL};
  if (sj_rope(&quantized, &pointers, NULL) != SJ_INVALID_ARGUMENT) return 15;

  /* A cache append to fp8 caches, its slots i32, with the blocks rule's two axes (ChatGLM halves). */
  const int64_t k_shape[4] = {2, 8, 2, 64};
  const int64_t cache_shape[4] = {4, 16, 2, 64};
  const int64_t slots_shape[1] = {16};
  const int64_t positions_shape[3] = {2, 2, 8};
  const int64_t halves[2] = {16, 16};
  sj_rope_desc cached = {.style = SJ_ROPE_NEOX,
                         .x = {4, x_shape, NULL, SJ_BF16, 0},
                         .k = {4, k_shape, NULL, SJ_BF16, 0},
                         .table = {2, table_shape, NULL, SJ_F32, 0},
                         .positions = {3, positions_shape, NULL, SJ_I64, 0},
                         .axis_rule = SJ_AXES_BLOCKS,
                         .axis_count = 2,
                         .axis_sections = halves,
                         .cache_layout = SJ_KV_CACHE_NHD,
                         .v = {4, k_shape, NULL, SJ_BF16, 0},
                         .k_cache = {4, cache_shape, NULL, SJ_U8, 0},
                         .v_cache = {4, cache_shape, NULL, SJ_U8, 0},
                         .slots = {1, slots_shape, NULL, SJ_I32, 0},
                         .cache_quantize = SJ_QUANTIZE_FP8_E4M3};
  if (sj_rope_plan_create(&rope, &cached) != SJ_OK || rope == NULL) return 16;
  if (sj_rope_plan_destroy(rope) != SJ_OK) return 17;
  cached.cache_quantize = SJ_QUANTIZE_NONE; /* u8 caches hold codes only */
  if (sj_rope_plan_create(&rope, &cached) != SJ_INVALID_ARGUMENT || rope != NULL) return 18;
  if (strstr(sj_last_error(), "k_cache.dtype is u8") == NULL) return 19;
  return 0;
}
