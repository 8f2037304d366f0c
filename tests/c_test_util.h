/* Helpers of the tests compiled as C (test_c_api.c, test_ggml_layout.c): deterministic values and NMSE. */
#ifndef HANPU_TESTS_C_TEST_UTIL_H_
#define HANPU_TESTS_C_TEST_UTIL_H_

/* Deterministic values in [-1, 1). */
static inline float next_value(unsigned* s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

/* ||y - ref||^2 / ||ref||^2 over n values. */
static inline double nmse(const float* y, const double* ref, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return num / den;
}

#endif /* HANPU_TESTS_C_TEST_UTIL_H_ */
