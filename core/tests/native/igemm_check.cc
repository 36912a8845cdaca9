// Native check of the integer GEMM kernels (MatMulInteger, QLinearMatMul, ConvInteger,
// QLinearConv and the dynamically quantized MatMul run on them) against a naive int64
// reference: every kernel this build registered and this CPU supports -- the int16 path
// (portable, neon, avx2) and the 8-bit dot-product path (dotprod, i8mm, avx512vnni) -- on
// edge sizes M, N, K in {1, 7, 17, 63, 257}, random sizes, every uint8/int8 operand pair
// and zero-point form, with sentinel guards around C. Results must be bit-exact.
//
// It prints which kernels ran and fails when the CPU has a feature (arm64 dotprod/i8mm,
// x86 AVX2/AVX512-VNNI) whose kernel was not exercised, e.g. because it was not compiled
// in or not registered.
//
// Usage: igemm_check [--expect-active NAME]   (NAME: the integer kernel the runtime must
// have chosen, e.g. with MOSAICRT_IGEMM_KERNEL set)
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gemm/backend_registry.h"
#include "kernels/quant_common.h"
#include "tensor.h"
#include "threadpool.h"

using namespace mrt;

namespace {

std::mt19937 rng(4321);

struct Case {
  int64_t M, N, K;
  bool a_s8, b_s8;
  int za_mode, zb_mode;  // 0 none, 1 scalar, 2 per row (A) / per column (B)
  int64_t pad_b, pad_c;
  bool extreme;          // bytes only at the ends of their range
  bool threads;
};

struct Data {
  std::vector<uint8_t> A, B;
  std::vector<int32_t> za, zb;
  std::vector<int32_t> ref;  // M x N
};

const int32_t kSentinel = 0x5A5A5A5A;

int32_t rand_byte(bool s8, bool extreme) {
  if (extreme) return std::uniform_int_distribution<int>(0, 1)(rng) ? (s8 ? 127 : 255) : (s8 ? -128 : 0);
  return s8 ? std::uniform_int_distribution<int>(-128, 127)(rng) : std::uniform_int_distribution<int>(0, 255)(rng);
}

Data make_data(const Case& cs) {
  Data d;
  const int64_t ldb = cs.N + cs.pad_b;
  d.A.resize(static_cast<size_t>(cs.M * cs.K));
  d.B.resize(static_cast<size_t>(cs.K * ldb), 0xEE);
  for (auto& v : d.A) v = static_cast<uint8_t>(rand_byte(cs.a_s8, cs.extreme));
  for (int64_t k = 0; k < cs.K; ++k)
    for (int64_t j = 0; j < cs.N; ++j) d.B[k * ldb + j] = static_cast<uint8_t>(rand_byte(cs.b_s8, cs.extreme));
  auto zps = [&](int mode, int64_t n, bool s8) {
    std::vector<int32_t> z;
    if (mode == 1) z.push_back(rand_byte(s8, cs.extreme));
    if (mode == 2)
      for (int64_t i = 0; i < n; ++i) z.push_back(rand_byte(s8, cs.extreme));
    return z;
  };
  d.za = zps(cs.za_mode, cs.M, cs.a_s8);
  d.zb = zps(cs.zb_mode, cs.N, cs.b_s8);
  auto a_at = [&](int64_t m, int64_t k) -> int64_t {
    const uint8_t v = d.A[m * cs.K + k];
    return cs.a_s8 ? static_cast<int8_t>(v) : v;
  };
  auto b_at = [&](int64_t k, int64_t n) -> int64_t {
    const uint8_t v = d.B[k * ldb + n];
    return cs.b_s8 ? static_cast<int8_t>(v) : v;
  };
  d.ref.resize(static_cast<size_t>(cs.M * cs.N));
  std::vector<int64_t> bcol(static_cast<size_t>(cs.K));
  for (int64_t n = 0; n < cs.N; ++n) {
    const int64_t zb = d.zb.empty() ? 0 : d.zb[d.zb.size() == 1 ? 0 : n];
    for (int64_t k = 0; k < cs.K; ++k) bcol[k] = b_at(k, n) - zb;
    for (int64_t m = 0; m < cs.M; ++m) {
      const int64_t za = d.za.empty() ? 0 : d.za[d.za.size() == 1 ? 0 : m];
      int64_t s = 0;
      for (int64_t k = 0; k < cs.K; ++k) s += (a_at(m, k) - za) * bcol[k];
      d.ref[m * cs.N + n] = static_cast<int32_t>(s);
    }
  }
  return d;
}

// One kernel: either an int16 one (k16) or an 8-bit one (k8).
struct Kernel {
  std::string name;
  const quant::Igemm16Kernel* k16 = nullptr;
  const quant::Igemm8Kernel* k8 = nullptr;
  int cases = 0, failures = 0;
};

int run(Kernel& kr, const Case& cs, const Data& d, ThreadPool* pool) {
  const int64_t M = cs.M, N = cs.N, K = cs.K, ldb = N + cs.pad_b, ldc = N + cs.pad_c;
  const int64_t guard = 32;
  std::vector<int32_t> C(static_cast<size_t>(M * ldc + guard), kSentinel);
  const int32_t* za = d.za.empty() ? nullptr : d.za.data();
  const int32_t* zb = d.zb.empty() ? nullptr : d.zb.data();
  if (kr.k8) {
    quant::PackedB8 pb;
    quant::pack_b8(*kr.k8, pb, d.B.data(), !cs.b_s8, ldb, K, N, zb, cs.zb_mode == 2);
    quant::igemm8(M, d.A.data(), cs.a_s8, K, K, za, cs.za_mode == 2, pb, C.data(), ldc, pool);
  } else {
    quant::PackedB pb;
    if (cs.b_s8) quant::pack_b_s8(pb, reinterpret_cast<const int8_t*>(d.B.data()), ldb, K, N, zb, cs.zb_mode == 2);
    else quant::pack_b_u8(pb, d.B.data(), ldb, K, N, zb, cs.zb_mode == 2);
    std::vector<uint8_t> a_copy = d.A;
    const Tensor at = Tensor::borrow(cs.a_s8 ? DType::kInt8 : DType::kUInt8, {M, K}, a_copy.data());
    const std::vector<int16_t> a16 = quant::pack_a(at, 0, M, K, za, cs.za_mode == 2, pb.Kp);
    quant::igemm_with(*kr.k16, M, a16.data(), pb, C.data(), ldc, pool);
    if (kr.k16->bytes_block) {  // the byte form must give the same C
      quant::PackedBBytes pbb;
      quant::pack_b_bytes(pbb, d.B.data(), cs.b_s8, ldb, K, N, zb, cs.zb_mode == 2);
      std::vector<int32_t> C2(C.size(), kSentinel);
      quant::igemm_bytes_with(*kr.k16, M, a16.data(), pbb, C2.data(), ldc, pool);
      for (size_t g = 0; g < C.size(); ++g)
        if (C2[g] != C[g]) {
          std::printf("FAIL igemm %s byte form M=%lld N=%lld K=%lld a=%s b=%s za=%d zb=%d: C[%zu]=%d, int16 form %d\n",
                      kr.name.c_str(), (long long)M, (long long)N, (long long)K, cs.a_s8 ? "s8" : "u8",
                      cs.b_s8 ? "s8" : "u8", cs.za_mode, cs.zb_mode, g, C2[g], C[g]);
          ++kr.failures;
          return 1;
        }
    }
  }
  ++kr.cases;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < ldc; ++j) {
      const int32_t got = C[m * ldc + j];
      const int32_t want = j < N ? d.ref[m * N + j] : kSentinel;
      if (got != want) {
        std::printf("FAIL igemm %s M=%lld N=%lld K=%lld a=%s b=%s za=%d zb=%d%s: C[%lld,%lld]=%d, want %d%s\n",
                    kr.name.c_str(), (long long)M, (long long)N, (long long)K, cs.a_s8 ? "s8" : "u8",
                    cs.b_s8 ? "s8" : "u8", cs.za_mode, cs.zb_mode, cs.extreme ? " extreme" : "", (long long)m,
                    (long long)j, got, want, j >= N ? " (padding written)" : "");
        ++kr.failures;
        return 1;
      }
    }
  for (int64_t g = M * ldc; g < M * ldc + guard; ++g)
    if (C[g] != kSentinel) {
      std::printf("FAIL igemm %s: wrote past the end of C (M=%lld N=%lld)\n", kr.name.c_str(), (long long)M,
                  (long long)N);
      ++kr.failures;
      return 1;
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string expect_active;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--expect-active") expect_active = argv[i + 1];
  const uint32_t features = cpu_features();
  std::printf("cpu features: %s\nactive kernels: %s\n", cpu_feature_names(features).c_str(), cpu_kernel_summary());

  std::vector<Kernel> kernels;
  for (CpuKernelFamily f : {CpuKernelFamily::kIgemm16, CpuKernelFamily::kIgemm8})
    for (const CpuKernelEntry* e : cpu_kernels(f)) {
      if (!cpu_kernel_supported(*e)) {
        std::printf("igemm kernel %s: compiled in, not supported by this CPU (skipped)\n", e->name);
        continue;
      }
      Kernel k;
      k.name = e->name;
      if (f == CpuKernelFamily::kIgemm16) k.k16 = static_cast<const quant::Igemm16Kernel*>(e->get());
      else k.k8 = static_cast<const quant::Igemm8Kernel*>(e->get());
      kernels.push_back(k);
    }

  ThreadPool pool2(2);
  std::vector<Case> cases;
  const int64_t edge[] = {1, 7, 17, 63, 257};
  int i = 0;
  for (int64_t M : edge)
    for (int64_t N : edge)
      for (int64_t K : edge) {
        cases.push_back({M, N, K, (i & 1) != 0, (i & 2) != 0, i % 3, (i / 3) % 3, (i / 2) % 3, (i / 5) % 4,
                         i % 11 == 3, i % 7 == 2});
        ++i;
      }
  std::uniform_int_distribution<int64_t> dim(1, 80);
  for (int r = 0; r < 60; ++r, ++i)
    cases.push_back({dim(rng), dim(rng), dim(rng), (r & 1) != 0, (r & 2) != 0, r % 3, (r / 3) % 3, r % 5, r % 3,
                     r % 9 == 4, r % 4 == 1});
  // Deep K (wide int32 accumulation, extreme bytes), more rows than one block of tasks.
  cases.push_back({33, 40, 1031, false, true, 1, 2, 0, 1, true, true});
  cases.push_back({70, 19, 700, true, false, 2, 1, 3, 0, true, false});
  cases.push_back({129, 65, 96, false, false, 1, 1, 0, 0, false, true});
  // One to three rows over deep K whose groups of 4 do not fill the few-row blocks' split accumulators.
  cases.push_back({1, 70, 2053, true, true, 2, 0, 1, 1, true, false});
  cases.push_back({2, 33, 515, false, true, 0, 2, 2, 0, false, true});
  cases.push_back({3, 64, 1029, true, false, 1, 0, 3, 1, true, true});

  // --expect-active only checks the runtime's choice (the sweep runs in the plain test).
  if (!expect_active.empty()) cases.clear();
  for (const Case& cs : cases) {
    const Data d = make_data(cs);
    for (Kernel& k : kernels) run(k, cs, d, cs.threads ? &pool2 : nullptr);
  }

  int failures = 0;
  std::set<std::string> ran;
  for (const Kernel& k : kernels) {
    if (!expect_active.empty()) break;
    std::printf("igemm kernel %s: %d cases %s\n", k.name.c_str(), k.cases,
                k.failures ? (std::to_string(k.failures) + " FAILED").c_str() : "OK");
    failures += k.failures;
    if (k.cases > 0 && k.failures == 0) ran.insert(k.name);
  }
  // Kernels the CPU can run must have run (a kernel missing from the build is a failure).
  std::vector<std::pair<uint32_t, const char*>> required;
#if defined(__aarch64__) || defined(_M_ARM64)
  required = {{kCpuNeon, "neon"}, {kCpuDotprod, "dotprod"}, {kCpuI8mm, "i8mm"}};
#elif defined(__x86_64__) || defined(_M_X64)
  required = {{kCpuAvx2Fma, "avx2"}, {kCpuAvx2Fma, "avx2u8s8"}, {kCpuAvx512Vnni, "avx512vnni"}};
#endif
  required.push_back({0, "portable"});
  for (const auto& r : required)
    if (expect_active.empty() && (features & r.first) == r.first && !ran.count(r.second)) {
      std::printf("FAIL: this CPU has %s but the igemm kernel '%s' was not exercised (not compiled in or not "
                  "registered?)\n",
                  r.first ? cpu_feature_names(r.first).c_str() : "no special feature", r.second);
      ++failures;
    }
  if (!expect_active.empty()) {
    const std::string summary = cpu_kernel_summary();
    if (summary.find(",igemm=" + expect_active + ",") == std::string::npos) {
      std::printf("FAIL: expected the active integer kernel to be '%s', got '%s'\n", expect_active.c_str(),
                  summary.c_str());
      ++failures;
    }
  }
  std::printf(failures ? "FAILED\n" : "OK\n");
  return failures ? 1 : 0;
}
