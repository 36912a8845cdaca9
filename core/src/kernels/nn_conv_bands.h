// The per-thread bands of the direct convolution kernels (nn_conv_direct_avx2.cc, nn_conv_direct_avx512.cc):
// each thread takes a band of consecutive output rows and stages the input rows of its band itself, so that no
// staged line goes from one core's cache to the other's. Include only from those files: the helper is
// instantiated with each file's own (internal) types.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "../threadpool.h"

namespace mrt {
namespace nn {
namespace {

// band(k): thread k's work range [0], [1) and the output rows [2], [3) it covers. Each thread runs
// work(band, stage(oh0, rows, most_rows)) for its band, most_rows the largest band's rows (every band's staged
// planes sized alike, so the step offsets are shared), then release().
using Band = std::array<int64_t, 4>;
template <class BandOf, class Stage, class Work, class Release>
void run_in_bands(ThreadPool& pool, BandOf band, Stage stage, Work work, Release release) {
  const int64_t threads = pool.size();
  int64_t most_rows = 0;
  for (int64_t k = 0; k < threads; ++k) most_rows = std::max(most_rows, band(k)[3] - band(k)[2]);
  pool.parallel_tasks(threads, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const Band bd = band(k);
      work(bd, stage(bd[2], bd[3] - bd[2], most_rows));
    }
    release();
  });
}

}  // namespace
}  // namespace nn
}  // namespace mrt
