// Native check of the SGEMM micro-kernels against a naive double-precision reference,
// with sentinel guards around C, plus a small timing mode. Every kernel this build
// registered (backend_registry.h) and the CPU supports is checked -- portable, neon (and
// sme where the CPU has it) on arm64, avx2/avx512 on x86-64 -- and a kernel the CPU could
// run but that did not run (not compiled in, not registered) is a failure.
//
// Built by core/tests/native/CMakeLists.txt (ctest; under qemu/wine when cross compiling).
// Run:   sgemm_check               correctness of every kernel this CPU supports
//        sgemm_check --bench       also GFLOP/s for 256^3, ResNet-50 and MLP shaped GEMMs
//        sgemm_check --bench-only  timing only
//        sgemm_check --expect-active NAME   also require the runtime's choice to be NAME
//                                  (e.g. with MOSAICRT_SGEMM_KERNEL set)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "gemm/backend_registry.h"
#include "gemm/sgemm.h"
#include "gemm/sgemm_kernels.h"
#include "threadpool.h"

using namespace mrt;

namespace {

std::mt19937 rng(1234);

float rnd() { return std::uniform_real_distribution<float>(-1.f, 1.f)(rng); }

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
  int64_t pad_a, pad_b, pad_c;
};

// kPackedASource: A pre-packed, B produced panel by panel (PanelSourceB, as Conv's
// im2col) and a TileEpilogue adding a per-row value that must see every element once.
enum class Mode { kPlain, kPackedA, kPackedB, kPackedASource };
constexpr int kModes = 4;

struct SourceB {
  const float* B;
  int64_t ldb;
  bool tb;
};

void fill_from_b(const void* ctx, int64_t k0, int64_t kc, int64_t j0, int64_t n, int nr, float* dst) {
  const SourceB& s = *static_cast<const SourceB*>(ctx);
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t j = 0; j < nr; ++j)
      dst[k * nr + j] = j >= n ? 0.f : s.tb ? s.B[(j0 + j) * s.ldb + k0 + k] : s.B[(k0 + k) * s.ldb + j0 + j];
}

struct RowStage {
  const float* add;  // per row of C
  int* visits;       // per element of C (row stride ldc)
  float* c0;         // C's first element
};

void row_stage(const void* ctx, int64_t i, int64_t m, int64_t j, int64_t n, float* c, int64_t ldc) {
  const RowStage& s = *static_cast<const RowStage*>(ctx);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t k = 0; k < n; ++k) {
      c[r * ldc + k] += s.add[i + r];
      ++s.visits[(c - s.c0) + r * ldc + k];
    }
}

const float kSentinel = 12345.678f;

// Returns the number of failures (0 or 1) and prints the first mismatch.
int run_case(const SgemmKernel& kr, const Case& cs, Mode mode, ThreadPool* pool) {
  const int64_t M = cs.M, N = cs.N, K = cs.K;
  const int64_t a_rows = cs.ta ? K : M, a_cols = cs.ta ? M : K;
  const int64_t b_rows = cs.tb ? N : K, b_cols = cs.tb ? K : N;
  const int64_t lda = a_cols + cs.pad_a, ldb = b_cols + cs.pad_b, ldc = N + cs.pad_c;
  std::vector<float> A(static_cast<size_t>(a_rows * lda)), B(static_cast<size_t>(b_rows * ldb));
  for (auto& v : A) v = rnd();
  for (auto& v : B) v = rnd();
  const int64_t guard = 64;
  std::vector<float> C(static_cast<size_t>(M * ldc + guard), kSentinel), C0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = cs.beta == 0.f ? NAN : rnd();
  C0 = C;
  std::vector<float> row_add(static_cast<size_t>(M), 0.f);
  if (mode == Mode::kPackedASource)
    for (auto& v : row_add) v = rnd();
  std::vector<int> visits(static_cast<size_t>(M * ldc), 0);
  auto a_at = [&](int64_t i, int64_t k) { return cs.ta ? A[k * lda + i] : A[i * lda + k]; };
  auto b_at = [&](int64_t k, int64_t j) { return cs.tb ? B[j * ldb + k] : B[k * ldb + j]; };

  switch (mode) {
    case Mode::kPlain:
      sgemm_with_kernel(kr, cs.ta, cs.tb, M, N, K, cs.alpha, A.data(), lda, B.data(), ldb, cs.beta, C.data(), ldc,
                        pool);
      break;
    case Mode::kPackedA: {
      PackedA pa = sgemm_pack_a_with_kernel(kr, cs.ta, M, K, A.data(), lda);
      sgemm_packed_a(pa, cs.tb, N, cs.alpha, B.data(), ldb, cs.beta, C.data(), ldc, pool);
      break;
    }
    case Mode::kPackedB: {
      PackedB pb = sgemm_pack_b_with_kernel(kr, cs.tb, K, N, B.data(), ldb);
      sgemm_packed_b(cs.ta, M, cs.alpha, A.data(), lda, pb, cs.beta, C.data(), ldc, pool);
      break;
    }
    case Mode::kPackedASource: {
      PackedA pa = sgemm_pack_a_with_kernel(kr, cs.ta, M, K, A.data(), lda);
      SourceB src{B.data(), ldb, cs.tb};
      PanelSourceB source;
      source.fill = fill_from_b;
      source.ctx = &src;
      RowStage st{row_add.data(), visits.data(), C.data()};
      TileEpilogue tile;
      tile.apply = row_stage;
      tile.ctx = &st;
      sgemm_packed_a_source(pa, N, cs.alpha, source, cs.beta, C.data(), ldc, pool, &tile);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          if (visits[i * ldc + j] != 1) {
            std::printf("FAIL %s: output stage ran %d times on C[%lld,%lld] (M=%lld N=%lld K=%lld)\n", kr.name,
                        visits[i * ldc + j], (long long)i, (long long)j, (long long)M, (long long)N, (long long)K);
            return 1;
          }
      break;
    }
  }
  // op(A) by rows and op(B) by columns, contiguous, so the reference's inner loop streams.
  std::vector<double> ar(static_cast<size_t>(M * K)), bc(static_cast<size_t>(N * K));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) ar[i * K + k] = a_at(i, k);
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < K; ++k) bc[j * K + k] = b_at(k, j);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = C[i * ldc + j];
      if (j >= N) {
        if (std::memcmp(&got, &kSentinel, sizeof(float)) != 0) {
          std::printf("FAIL %s: wrote padding C[%lld,%lld]\n", kr.name, (long long)i, (long long)j);
          return 1;
        }
        continue;
      }
      double ref = 0, mag = 0;
      const double* ai = ar.data() + i * K;
      const double* bj = bc.data() + j * K;
      for (int64_t k = 0; k < K; ++k) {
        const double p = ai[k] * bj[k];
        ref += p;
        mag += std::fabs(p);
      }
      ref *= cs.alpha;
      if (cs.beta != 0.f) ref += static_cast<double>(cs.beta) * C0[i * ldc + j];
      ref += row_add[static_cast<size_t>(i)];
      const double tol = 1e-5 * (mag * std::fabs(cs.alpha) + 1.0) + 1e-6;
      if (!(std::fabs(got - ref) <= tol)) {
        std::printf("FAIL %s mode=%d ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g ldc=%lld: C[%lld,%lld]=%g ref=%g\n",
                    kr.name, static_cast<int>(mode), cs.ta, cs.tb, (long long)M, (long long)N, (long long)K,
                    cs.alpha, cs.beta, (long long)ldc, (long long)i, (long long)j, got, ref);
        return 1;
      }
    }
  }
  for (int64_t g = M * ldc; g < M * ldc + guard; ++g)
    if (std::memcmp(&C[g], &kSentinel, sizeof(float)) != 0) {
      std::printf("FAIL %s: wrote past the end of C (M=%lld N=%lld ldc=%lld)\n", kr.name, (long long)M, (long long)N,
                  (long long)ldc);
      return 1;
    }
  return 0;
}

int check_kernel(const SgemmKernel& kr, ThreadPool* pool2) {
  int failures = 0, cases = 0;
  const float alphas[] = {1.f, 0.5f, -1.25f};
  const float betas[] = {0.f, 1.f, 0.75f};
  std::vector<int64_t> edge = {1, 2, static_cast<int64_t>(kr.mr) - 1, kr.mr, kr.mr + 1, kr.nr - 1, kr.nr, kr.nr + 1,
                               67};
  // Edge sizes crossed with transposes.
  for (int64_t M : edge)
    for (int64_t N : edge)
      for (int64_t K : {int64_t(1), int64_t(7), int64_t(67)})
        for (int t = 0; t < 4; ++t) {
          if (M < 1 || N < 1) continue;
          Case cs{(t & 1) != 0, (t & 2) != 0, M, N, K, alphas[cases % 3], betas[(cases / 3) % 3],
                  cases % 2, (cases / 2) % 3, (cases % 5) + (cases % 2) * 3};
          failures += run_case(kr, cs, static_cast<Mode>(cases % kModes), nullptr);
          ++cases;
        }
  // The edge sizes 1, 7, 17, 63, 257 for M, N and K, all combinations, cycling through
  // transposes, alpha/beta and the plain / packed-A / packed-B entry points.
  const int64_t sizes[] = {1, 7, 17, 63, 257};
  int e = 0;
  for (int64_t M : sizes)
    for (int64_t N : sizes)
      for (int64_t K : sizes) {
        Case cs{(e & 1) != 0, (e & 2) != 0, M, N, K, alphas[e % 3], betas[(e / 4) % 3], e % 2, (e / 3) % 2, e % 3};
        failures += run_case(kr, cs, static_cast<Mode>((e / 2) % kModes), e % 5 == 1 ? pool2 : nullptr);
        ++cases;
        ++e;
      }
  // Random sizes 1..67 in every mode.
  std::uniform_int_distribution<int64_t> dim(1, 67);
  for (int r = 0; r < 600; ++r) {
    Case cs{(r & 1) != 0, (r & 2) != 0, dim(rng), dim(rng), dim(rng), alphas[r % 3], betas[(r / 3) % 3],
            r % 3, r % 4, (r % 7) * 3};
    failures += run_case(kr, cs, static_cast<Mode>(r % kModes), nullptr);
    ++cases;
  }
  // Blocking boundaries (K > kc, M > mc, N > nc is too slow for the reference: N near a
  // panel boundary instead) single- and multi-threaded.
  const Case big[] = {
      {false, false, 300, 97, 600, 1.f, 0.f, 0, 0, 3},  {true, false, 157, 130, 513, 0.5f, 1.f, 1, 2, 0},
      {false, true, 290, 65, 257, 1.f, 0.5f, 0, 1, 1},  {true, true, 61, 200, 300, -1.f, 0.f, 2, 0, 5},
      {false, false, 1, 300, 700, 1.f, 0.f, 0, 0, 0},   {false, true, 1, 129, 300, 2.f, 1.f, 0, 0, 0},
      {false, false, 200, 1, 300, 1.f, 0.f, 0, 0, 2},   {false, false, 64, 3136 / 16, 147, 1.f, 0.f, 0, 0, 0},
      {false, false, 1, 2000, 1500, 1.f, 0.5f, 0, 3, 0}, {true, true, 1, 1500, 1400, 1.f, 0.f, 0, 0, 0},
      {false, false, 1500, 1, 1400, 1.f, 1.f, 1, 0, 4}, {true, true, 1400, 1, 1500, -1.f, 0.f, 0, 0, 0},
  };
  for (const Case& cs : big)
    for (int mode = 0; mode < kModes; ++mode)
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), pool2}) {
        failures += run_case(kr, cs, static_cast<Mode>(mode), p);
        ++cases;
      }
  std::printf("%-10s mr=%d nr=%d: %d cases, %d failures\n", kr.name, kr.mr, kr.nr, cases, failures);
  return failures;
}

// GFLOP/s of C = A * op(B); `packed`: 0 plain, 1 A pre-packed (Conv filters), 2 B pre-packed
// (MatMul/Gemm constant weights). Packing is outside the timed loop.
// Also reports GFLOP per CPU-second (all threads), which a busy machine distorts less.
double bench(const SgemmKernel& kr, int64_t M, int64_t N, int64_t K, bool tb, int packed, ThreadPool* pool,
             double* cpu_gflops) {
  std::vector<float> A(M * K), B(K * N), C(M * N);
  for (auto& v : A) v = rnd();
  for (auto& v : B) v = rnd();
  const int64_t ldb = tb ? K : N;
  PackedA pa;
  PackedB pb;
  if (packed == 1) pa = sgemm_pack_a_with_kernel(kr, false, M, K, A.data(), K);
  if (packed == 2) pb = sgemm_pack_b_with_kernel(kr, tb, K, N, B.data(), ldb);
  auto once = [&] {
    if (packed == 1) {
      sgemm_packed_a(pa, tb, N, 1.f, B.data(), ldb, 0.f, C.data(), N, pool);
    } else if (packed == 2) {
      sgemm_packed_b(false, M, 1.f, A.data(), K, pb, 0.f, C.data(), N, pool);
    } else {
      sgemm_with_kernel(kr, false, tb, M, N, K, 1.f, A.data(), K, B.data(), ldb, 0.f, C.data(), N, pool);
    }
  };
  once();
  const double flops = 2.0 * M * N * K;
  int reps = std::max(1, static_cast<int>(2e9 / flops / 8));
  double best = 1e30, best_cpu = 1e30;
  for (int trial = 0; trial < 5; ++trial) {
    const std::clock_t c0 = std::clock();
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) once();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    best = std::min(best, s);
    best_cpu = std::min(best_cpu, static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC / reps);
  }
  if (cpu_gflops) *cpu_gflops = flops / best_cpu * 1e-9;
  return flops / best * 1e-9;
}

}  // namespace

// Weights packed once for the micro-kernels start on a cache line (aligned_vector.h): the kernels read them as
// whole 64-byte vectors, and a packing that lands 16 bytes off a line makes most of those loads straddle two.
int check_packed_alignment() {
  int failures = 0;
  std::vector<float> src(static_cast<size_t>(97 * 131));
  for (float& v : src) v = rnd();
  for (int64_t n : {1, 7, 33, 97}) {
    const PackedA a = sgemm_pack_a(false, n, 131, src.data(), 131);
    const PackedB b = sgemm_pack_b(false, 97, n, src.data(), n);
    for (const float* p : {a.data.data(), b.data.data()})
      if (reinterpret_cast<uintptr_t>(p) % kCacheLine != 0) {
        std::printf("FAIL: packed panels of size %lld start %llu bytes past a cache line\n", static_cast<long long>(n),
                    static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p) % kCacheLine));
        ++failures;
      }
  }
  return failures;
}

int main(int argc, char** argv) {
  bool do_bench = argc > 1 && std::string(argv[1]) == "--bench";
  ThreadPool pool2(2);
  std::string expect_active;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--expect-active") expect_active = argv[i + 1];
  // Every kernel this build registered and this CPU supports (backend_registry.h).
  std::vector<const SgemmKernel*> kernels;
  std::vector<std::string> names;
  for (const CpuKernelEntry* e : cpu_kernels(CpuKernelFamily::kSgemm)) {
    if (!cpu_kernel_supported(*e)) {
      std::printf("sgemm kernel %s: compiled in, not supported by this CPU (skipped)\n", e->name);
      continue;
    }
    kernels.push_back(static_cast<const SgemmKernel*>(e->get()));
    names.push_back(e->name);
  }
  std::printf("cpu features: %s\nactive kernels: %s (sgemm %s)\n", cpu_feature_names(cpu_features()).c_str(),
              cpu_kernel_summary(), sgemm_kernel_name());
  int failures = 0;
  // --expect-active only checks the runtime's choice (the sweep runs in the plain test).
  if (!(argc > 1 && std::string(argv[1]) == "--bench-only") && expect_active.empty()) {
    std::vector<std::string> ran;
    failures += check_packed_alignment();
    for (size_t i = 0; i < kernels.size(); ++i) {
      const int f = check_kernel(*kernels[i], &pool2);
      std::printf("sgemm kernel %s: %s\n", names[i].c_str(), f ? "FAILED" : "OK");
      if (!f) ran.push_back(names[i]);
      failures += f;
    }
    // Kernels the CPU can run must have run (a kernel missing from the build is a failure).
    std::vector<std::pair<uint32_t, const char*>> required = {{0u, "portable"}};
#if defined(__aarch64__) || defined(_M_ARM64)
    required.push_back({kCpuNeon, "neon"});
    required.push_back({kCpuNeon | kCpuSme, "sme"});
#elif defined(__x86_64__) || defined(_M_X64)
    required.push_back({kCpuAvx2Fma, "avx2"});
    required.push_back({kCpuAvx512, "avx512"});
#endif
    for (const auto& r : required)
      if ((cpu_features() & r.first) == r.first && std::find(ran.begin(), ran.end(), r.second) == ran.end()) {
        std::printf("FAIL: this CPU supports the sgemm kernel '%s' but it was not exercised (not compiled in or "
                    "not registered?)\n",
                    r.second);
        ++failures;
      }
  }
  if (!expect_active.empty() && std::string(cpu_kernel_summary()).find("sgemm=" + expect_active + ",") != 0) {
    std::printf("FAIL: expected the active sgemm kernel to be '%s', got '%s'\n", expect_active.c_str(),
                cpu_kernel_summary());
    ++failures;
  }
  if (do_bench || (argc > 1 && std::string(argv[1]) == "--bench-only")) {
    struct Shape {
      const char* what;
      int64_t M, N, K;
      bool tb;
      int packed;
    };
    // ResNet-50 convolutions as im2col GEMMs (batch 1, filters pre-packed as A) and
    // transformer-style MatMuls (weights pre-packed as B).
    const Shape shapes[] = {
        {"square 256", 256, 256, 256, false, 0},       {"conv1 7x7", 64, 12544, 147, false, 1},
        {"l1 1x1 64", 64, 3136, 64, false, 1},          {"l1 3x3", 64, 3136, 576, false, 1},
        {"l1 1x1 256", 256, 3136, 64, false, 1},        {"l2 3x3", 128, 784, 1152, false, 1},
        {"l3 3x3", 256, 196, 2304, false, 1},           {"l4 3x3", 512, 49, 4608, false, 1},
        {"l4 1x1", 2048, 49, 512, false, 1},            {"l4 3x3 raw", 512, 49, 4608, false, 0},
        {"fc B^T pk", 1, 1000, 2048, true, 2},          {"fc B^T raw", 1, 1000, 2048, true, 0},
        {"mlp 128x768", 128, 3072, 768, false, 2},      {"mlp raw", 128, 3072, 768, false, 0},
    };
    for (const SgemmKernel* k : kernels) {
      if (std::string(k->name) == "portable" && kernels.size() > 1) continue;
      std::printf("%s GFLOP/s: 1 thread wall, cpu | 2 threads wall, per cpu-second\n", k->name);
      for (const Shape& s : shapes) {
        double c1 = 0, c2 = 0;
        double g1 = bench(*k, s.M, s.N, s.K, s.tb, s.packed, nullptr, &c1);
        double g2 = bench(*k, s.M, s.N, s.K, s.tb, s.packed, &pool2, &c2);
        std::printf("  %-12s M=%-5lld N=%-6lld K=%-5lld %7.1f %7.1f | %7.1f %7.1f\n", s.what, (long long)s.M,
                    (long long)s.N, (long long)s.K, g1, c1, g2, c2);
      }
    }
  }
  std::printf(failures ? "FAILED\n" : "OK\n");
  return failures ? 1 : 0;
}
