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
  return 0;
}
