// Vectors whose storage starts on a cache line. Weights packed once for a kernel (GEMM panels, direct and
// pointwise convolution filters) are read as whole 64-byte vectors on every step of the kernel's inner loop: from
// a plain std::vector (16-byte aligned) three loads in four straddle two cache lines, and each such load costs
// two accesses to L1.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace mrt {

inline constexpr size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLine})); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLine}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const noexcept {
    return false;
  }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace mrt
