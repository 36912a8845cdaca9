// Shared helpers of the shape kernel group: strided copies, transposes, index reading.
#include "shape_common.h"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

namespace mrt {
namespace shape_kernels {

size_t element_size(const Tensor& t, const char* op) {
  size_t s = dtype_size(t.dtype());
  if (s == 0) fail(MRT_NOT_IMPLEMENTED, op, ": element type ", dtype_name(t.dtype()), " is not supported");
  return s;
}

std::vector<int64_t> read_int64s(const Tensor& t, const char* what) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::kInt64: {
      const int64_t* p = t.data_as<int64_t>();
      std::copy(p, p + t.numel(), v.begin());
      break;
    }
    case DType::kInt32: {
      const int32_t* p = t.data_as<int32_t>();
      std::copy(p, p + t.numel(), v.begin());
      break;
    }
    case DType::kInt8: case DType::kInt16: case DType::kUInt8: case DType::kUInt16: case DType::kUInt32:
    case DType::kUInt64:
      for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.int_at(i);
      break;
    default:
      fail(MRT_INVALID_ARGUMENT, what, " must be an integer tensor, got ", t.describe());
  }
  return v;
}

void store_scalar(DType dt, double v, void* dst) {
  switch (dt) {
    case DType::kFloat: { float x = static_cast<float>(v); std::memcpy(dst, &x, 4); break; }
    case DType::kDouble: std::memcpy(dst, &v, 8); break;
    case DType::kFloat16: { uint16_t x = float_to_half(static_cast<float>(v)); std::memcpy(dst, &x, 2); break; }
    case DType::kBFloat16: { uint16_t x = float_to_bfloat16(static_cast<float>(v)); std::memcpy(dst, &x, 2); break; }
    case DType::kBool: { uint8_t x = v != 0.0 ? 1 : 0; std::memcpy(dst, &x, 1); break; }
#define MRT_STORE_INT(E, T) \
    case DType::E: { T x = static_cast<T>(v); std::memcpy(dst, &x, sizeof(T)); break; }
    MRT_STORE_INT(kInt8, int8_t)
    MRT_STORE_INT(kInt16, int16_t)
    MRT_STORE_INT(kInt32, int32_t)
    MRT_STORE_INT(kInt64, int64_t)
    MRT_STORE_INT(kUInt8, uint8_t)
    MRT_STORE_INT(kUInt16, uint16_t)
    MRT_STORE_INT(kUInt32, uint32_t)
    MRT_STORE_INT(kUInt64, uint64_t)
#undef MRT_STORE_INT
    default: fail(MRT_NOT_IMPLEMENTED, "element type ", dtype_name(dt), " is not supported");
  }
}

void fill_elements(void* dst, const void* value, size_t esize, int64_t count) {
  if (count <= 0) return;
  dispatch_by_size(esize, "fill", [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, value, sizeof(T));
    std::fill(static_cast<T*>(dst), static_cast<T*>(dst) + count, v);
  });
}

void maybe_parallel(const OpContext& ctx, int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  constexpr int64_t kMinWork = 1 << 15;
  if (work < 2 * kMinWork || n < 2 || ctx.threads().size() <= 1) {
    fn(0, n);
    return;
  }
  int64_t per_item = std::max<int64_t>(1, work / n);
  int64_t grain = std::max<int64_t>(1, kMinWork / per_item);
  ctx.threads().parallel_for(n, grain, fn);
}

namespace {

// Walks a multi-index over `dims` (last fastest) tracking a source and destination offset.
struct Odometer {
  std::vector<int64_t> dims, sstride, dstride, idx;
  int64_t soff = 0, doff = 0;

  void seek(int64_t linear) {
    idx.assign(dims.size(), 0);
    soff = doff = 0;
    for (size_t k = dims.size(); k-- > 0;) {
      idx[k] = linear % dims[k];
      linear /= dims[k];
      soff += idx[k] * sstride[k];
      doff += idx[k] * dstride[k];
    }
  }
  void next() {
    for (size_t k = dims.size(); k-- > 0;) {
      ++idx[k];
      soff += sstride[k];
      doff += dstride[k];
      if (idx[k] < dims[k]) return;
      soff -= sstride[k] * dims[k];
      doff -= dstride[k] * dims[k];
      idx[k] = 0;
    }
  }
};

// dst[a * ds + c] = src[a + c * ss] for a in [r0, r1), c in [c0, c1).
template <class T>
inline void transpose_tile_scalar(const T* src, int64_t ss, T* dst, int64_t ds, int64_t r0, int64_t r1, int64_t c0,
                                  int64_t c1) {
  for (int64_t c = c0; c < c1; ++c) {
    const T* srow = src + c * ss;
    for (int64_t a = r0; a < r1; ++a) dst[a * ds + c] = srow[a];
  }
}

template <class T>
inline void transpose_tile(const T* src, int64_t ss, T* dst, int64_t ds, int64_t r0, int64_t r1, int64_t c0,
                           int64_t c1) {
#if defined(__SSE2__)
  if constexpr (sizeof(T) == 4) {
    // 4x4 register transposes (pure bit moves, so any 4-byte type is safe).
    int64_t c = c0;
    for (; c + 4 <= c1; c += 4) {
      const float* s0 = reinterpret_cast<const float*>(src + c * ss);
      const float* s1 = s0 + ss;
      const float* s2 = s1 + ss;
      const float* s3 = s2 + ss;
      int64_t a = r0;
      for (; a + 4 <= r1; a += 4) {
        __m128 x0 = _mm_loadu_ps(s0 + a), x1 = _mm_loadu_ps(s1 + a), x2 = _mm_loadu_ps(s2 + a),
               x3 = _mm_loadu_ps(s3 + a);
        _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
        float* d = reinterpret_cast<float*>(dst + a * ds + c);
        _mm_storeu_ps(d, x0);
        _mm_storeu_ps(d + ds, x1);
        _mm_storeu_ps(d + 2 * ds, x2);
        _mm_storeu_ps(d + 3 * ds, x3);
      }
      if (a < r1) transpose_tile_scalar(src, ss, dst, ds, a, r1, c, c + 4);
    }
    if (c < c1) transpose_tile_scalar(src, ss, dst, ds, r0, r1, c, c1);
    return;
  }
#endif
  transpose_tile_scalar(src, ss, dst, ds, r0, r1, c0, c1);
}

template <class T>
void strided_copy_typed(const OpContext& ctx, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                        const T* src, T* dst) {
  const size_t r = dims.size();
  std::vector<int64_t> dstrides(r, 1);
  for (size_t k = r; k-- > 1;) dstrides[k - 1] = dstrides[k] * dims[k];
  int64_t total = dstrides[0] * dims[0];
  const int64_t inner = dims[r - 1];
  const int64_t s_inner = strides[r - 1];

  // Blocked 2-D transpose: the innermost output dim is strided and another dim is
  // contiguous in the source (NCHW<->NHWC, plain matrix transposes, DepthToSpace, ...).
  int64_t j = -1;
  if (s_inner != 1 && s_inner != 0 && inner >= 2) {
    for (size_t k = 0; k + 1 < r; ++k)
      if (strides[k] == 1 && dims[k] >= 4) j = static_cast<int64_t>(k);
  }
  if (j >= 0) {
    const int64_t rows = dims[j];  // contiguous in src, stride dstrides[j] in dst
    const int64_t ds_j = dstrides[j];
    constexpr int64_t kBlock = 16;
    Odometer od;
    for (size_t k = 0; k + 1 < r; ++k) {
      if (static_cast<int64_t>(k) == j) continue;
      od.dims.push_back(dims[k]);
      od.sstride.push_back(strides[k]);
      od.dstride.push_back(dstrides[k]);
    }
    int64_t outer = 1;
    for (int64_t d : od.dims) outer *= d;
    const int64_t rblocks = (rows + kBlock - 1) / kBlock;
    maybe_parallel(ctx, outer * rblocks, total, [&](int64_t b, int64_t e) {
      Odometer o = od;
      int64_t cur = b / rblocks;
      o.seek(cur);
      for (int64_t it = b; it < e; ++it) {
        int64_t ob = it / rblocks;
        if (ob != cur) {
          o.next();
          cur = ob;
        }
        int64_t r0 = (it % rblocks) * kBlock, r1 = std::min(rows, r0 + kBlock);
        const T* s = src + o.soff;
        T* d = dst + o.doff;
        for (int64_t c0 = 0; c0 < inner; c0 += kBlock) {
          int64_t c1 = std::min(inner, c0 + kBlock);
          transpose_tile<T>(s, s_inner, d, ds_j, r0, r1, c0, c1);
        }
      }
    });
    return;
  }

  // Row-wise: the innermost dim is contiguous (memcpy), broadcast (fill) or strided.
  Odometer od;
  od.dims.assign(dims.begin(), dims.end() - 1);
  od.sstride.assign(strides.begin(), strides.end() - 1);
  od.dstride.assign(dstrides.begin(), dstrides.end() - 1);
  const int64_t nrows = total / inner;
  maybe_parallel(ctx, nrows, total, [&](int64_t b, int64_t e) {
    Odometer o = od;
    o.seek(b);
    for (int64_t row = b; row < e; ++row, o.next()) {
      const T* s = src + o.soff;
      T* d = dst + row * inner;
      if (s_inner == 1) {
        std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(T));
      } else if (s_inner == 0) {
        std::fill(d, d + inner, *s);
      } else {
        for (int64_t c = 0; c < inner; ++c) d[c] = s[c * s_inner];
      }
    }
  });
}

}  // namespace

void strided_copy(const OpContext& ctx, size_t esize, const Shape& out_shape, const std::vector<int64_t>& in_strides,
                  const void* src, int64_t src_offset, void* dst) {
  if (shape_size(out_shape) == 0) return;
  std::vector<int64_t> dims, strides;
  for (size_t k = 0; k < out_shape.size(); ++k) {
    if (out_shape[k] == 1) continue;
    if (!dims.empty() && strides.back() == in_strides[k] * out_shape[k]) {
      dims.back() *= out_shape[k];
      strides.back() = in_strides[k];
    } else {
      dims.push_back(out_shape[k]);
      strides.push_back(in_strides[k]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    strides.push_back(1);
  }
  dispatch_by_size(esize, "copy", [&](auto tag) {
    using T = decltype(tag);
    strided_copy_typed<T>(ctx, dims, strides, static_cast<const T*>(src) + src_offset, static_cast<T*>(dst));
  });
}

void gather_by_axis_maps(const OpContext& ctx, const Tensor& x, const std::vector<std::vector<int64_t>>& maps,
                         const void* fill, Tensor& y) {
  const size_t r = x.rank();
  const size_t es = element_size(x, "copy");
  if (y.numel() == 0) return;
  if (r == 0) {
    std::memcpy(y.raw(), x.raw(), es);
    return;
  }
  const Shape& out = y.shape();
  std::vector<int64_t> xs = shape_strides(x.shape());
  const int64_t inner = out[r - 1];
  const int64_t rows = y.numel() / inner;
  const std::vector<int64_t>& last = maps[r - 1];
  // The longest run of the last axis that maps to consecutive source elements is copied
  // with memcpy; the rest element by element.
  int64_t c0 = 0, c1 = 0;
  for (int64_t c = 0; c < inner;) {
    if (last[static_cast<size_t>(c)] < 0) {
      ++c;
      continue;
    }
    int64_t e = c + 1;
    while (e < inner && last[static_cast<size_t>(e)] == last[static_cast<size_t>(e - 1)] + 1) ++e;
    if (e - c > c1 - c0) {
      c0 = c;
      c1 = e;
    }
    c = e;
  }
  dispatch_by_size(es, "copy", [&](auto tag) {
    using T = decltype(tag);
    T cv;
    std::memcpy(&cv, fill, sizeof(T));
    const T* src = static_cast<const T*>(x.raw());
    T* dst = static_cast<T*>(y.raw());
    maybe_parallel(ctx, rows, y.numel(), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        T* d = dst + row * inner;
        int64_t rem = row, soff = 0;
        bool fill_row = false;
        for (size_t k = r - 1; k-- > 0;) {
          int64_t o = rem % out[k];
          rem /= out[k];
          int64_t s = maps[k][static_cast<size_t>(o)];
          if (s < 0) {
            fill_row = true;
            break;
          }
          soff += s * xs[k];
        }
        if (fill_row) {
          std::fill(d, d + inner, cv);
          continue;
        }
        const T* srow = src + soff;
        for (int64_t c = 0; c < c0; ++c) {
          int64_t s = last[static_cast<size_t>(c)];
          d[c] = s < 0 ? cv : srow[s];
        }
        if (c1 > c0)
          std::memcpy(d + c0, srow + last[static_cast<size_t>(c0)], static_cast<size_t>(c1 - c0) * sizeof(T));
        for (int64_t c = c1; c < inner; ++c) {
          int64_t s = last[static_cast<size_t>(c)];
          d[c] = s < 0 ? cv : srow[s];
        }
      }
    });
  });
}

void transpose_copy(const OpContext& ctx, size_t esize, const Shape& in_shape, const std::vector<int64_t>& perm,
                    const void* src, void* dst) {
  std::vector<int64_t> in_strides = shape_strides(in_shape);
  Shape out_shape(perm.size());
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out_shape[i] = in_shape[static_cast<size_t>(perm[i])];
    strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  strided_copy(ctx, esize, out_shape, strides, src, 0, dst);
}

}  // namespace shape_kernels
}  // namespace mrt
