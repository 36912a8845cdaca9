/* Shared helpers of the C test programs: CHECK counts a failure with its location; ok()
 * reports and releases a non-NULL status. Each program returns non-zero when failures > 0. */
#ifndef MOSAICRT_TESTS_NATIVE_CHECK_H_
#define MOSAICRT_TESTS_NATIVE_CHECK_H_

#include <stdio.h>

#include "mosaicrt/mosaicrt.h"

static int failures = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      ++failures;                                          \
    }                                                      \
  } while (0)

static int ok(MrtStatus* st, const char* what) {
  if (!st) return 1;
  fprintf(stderr, "FAIL %s: [%d] %s\n", what, (int)MrtStatusGetCode(st), MrtStatusGetMessage(st));
  MrtReleaseStatus(st);
  ++failures;
  return 0;
}

#endif /* MOSAICRT_TESTS_NATIVE_CHECK_H_ */
