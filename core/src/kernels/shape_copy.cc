// Kernel group: shape — copying kernels built on strided copies and block moves:
// Transpose, Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu,
// ReverseSequence.
#include <algorithm>
#include <limits>

#include "../kernel.h"
#include "shape_common.h"

namespace mrt {
namespace shape_kernels {
namespace {

// ---- Transpose -----------------------------------------------------------------------------

void transpose_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t r = x.rank();
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (perm.empty() && !ctx.node().has_attr("perm")) {
    perm.resize(r);
    for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(r - 1 - i);
  }
  MRT_CHECK_ARG(perm.size() == r, "perm ", shape_str(perm), " does not match input ", x.describe());
  std::vector<bool> seen(r, false);
  for (int64_t& p : perm) {
    if (p < 0) p += static_cast<int64_t>(r);
    MRT_CHECK_ARG(p >= 0 && p < static_cast<int64_t>(r) && !seen[static_cast<size_t>(p)], "perm ",
                  shape_str(ctx.node().attr_ints("perm")), " is not a permutation of 0..", r - 1);
    seen[static_cast<size_t>(p)] = true;
  }
  Shape out(r);
  for (size_t i = 0; i < r; ++i) out[i] = x.dim(static_cast<size_t>(perm[i]));
  // When the dims larger than 1 keep their order the bytes do not move: return a view.
  int64_t last = -1;
  bool same_order = true;
  for (size_t i = 0; i < r && same_order; ++i) {
    if (out[i] == 1) continue;
    if (perm[i] < last) same_order = false;
    last = perm[i];
  }
  if (same_order) {
    ctx.set_output(0, Tensor::reshaped(x, out));
    return;
  }
  size_t es = element_size(x, "Transpose");
  Tensor& y = ctx.output(0, x.dtype(), out);
  transpose_copy(ctx, es, x.shape(), perm, x.raw(), y.raw());
}

// ---- Concat ----------------------------------------------------------------------------------

void concat_kernel(OpContext& ctx) {
  const size_t n = ctx.input_count();
  MRT_CHECK_ARG(n >= 1, "Concat needs at least one input");
  const Tensor& first = ctx.input(0);
  const int64_t r = static_cast<int64_t>(first.rank());
  MRT_CHECK_ARG(r >= 1, "Concat inputs must have rank >= 1, got ", first.describe());
  const int64_t axis_attr = ctx.opset() < 4 ? ctx.node().attr_int("axis", 1) : ctx.node().require_int("axis");
  const int64_t axis = checked_axis(axis_attr, r, "axis");
  Shape out = first.shape();
  out[static_cast<size_t>(axis)] = 0;
  std::vector<const Tensor*> ins(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = ctx.input(i);
    ins[i] = &t;
    MRT_CHECK_ARG(t.dtype() == first.dtype(), "input ", i, " is ", t.describe(), " but input 0 is ",
                  first.describe());
    MRT_CHECK_ARG(static_cast<int64_t>(t.rank()) == r, "input ", i, " ", t.describe(),
                  " has another rank than input 0 ",
                  first.describe());
    for (int64_t k = 0; k < r; ++k)
      MRT_CHECK_ARG(k == axis || t.dim(static_cast<size_t>(k)) == first.dim(static_cast<size_t>(k)), "input ", i, " ",
                    t.describe(), " does not match input 0 ", first.describe(), " outside axis ", axis);
    out[static_cast<size_t>(axis)] += t.dim(static_cast<size_t>(axis));
  }
  if (n == 1) {
    ctx.set_output(0, first);
    return;
  }
  size_t es = element_size(first, "Concat");
  Tensor& y = ctx.output(0, first.dtype(), out);
  if (y.numel() == 0) return;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= out[static_cast<size_t>(k)];
  for (int64_t k = axis + 1; k < r; ++k) inner *= out[static_cast<size_t>(k)];
  const size_t out_row = static_cast<size_t>(out[static_cast<size_t>(axis)] * inner) * es;
  std::vector<size_t> row_bytes(n), col_off(n);
  size_t off = 0;
  for (size_t i = 0; i < n; ++i) {
    row_bytes[i] = static_cast<size_t>(ins[i]->dim(static_cast<size_t>(axis)) * inner) * es;
    col_off[i] = off;
    off += row_bytes[i];
  }
  char* dst = static_cast<char*>(y.raw());
  if (outer >= 4 * ctx.threads().size()) {
    maybe_parallel(ctx, outer, y.numel(), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        for (size_t i = 0; i < n; ++i)
          if (row_bytes[i])
            std::memcpy(dst + static_cast<size_t>(o) * out_row + col_off[i],
                        static_cast<const char*>(ins[i]->raw()) + static_cast<size_t>(o) * row_bytes[i], row_bytes[i]);
    });
    return;
  }
  // Few rows (a batch-1 Concat along channels: one row of a few large blocks): the blocks in pieces, so that
  // the threads share the copy.
  constexpr size_t kPiece = size_t{64} << 10;
  struct Piece {
    char* d;
    const char* s;
    size_t bytes;
  };
  std::vector<Piece> pieces;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < n; ++i) {
      if (outer == 1 && ins[i]->raw() == dst + col_off[i]) continue;  // written in place (Concat placement)
      for (size_t at = 0; at < row_bytes[i]; at += kPiece)
        pieces.push_back({dst + static_cast<size_t>(o) * out_row + col_off[i] + at,
                          static_cast<const char*>(ins[i]->raw()) + static_cast<size_t>(o) * row_bytes[i] + at,
                          std::min(kPiece, row_bytes[i] - at)});
    }
  maybe_parallel(ctx, static_cast<int64_t>(pieces.size()), y.numel(), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) std::memcpy(pieces[static_cast<size_t>(k)].d, pieces[static_cast<size_t>(k)].s,
                                                pieces[static_cast<size_t>(k)].bytes);
  });
}

// ---- Split -----------------------------------------------------------------------------------

void split_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  const int64_t r = static_cast<int64_t>(x.rank());
  MRT_CHECK_ARG(r >= 1, "Split input must have rank >= 1, got ", x.describe());
  const int64_t axis = checked_axis(node.attr_int("axis", 0), r, "axis");
  const int64_t dim = x.dim(static_cast<size_t>(axis));
  const size_t nout = ctx.output_count();
  MRT_CHECK_ARG(nout >= 1, "Split needs at least one output");
  std::vector<int64_t> sizes;
  bool have_split = false;
  if (ctx.opset() >= 13 || (ctx.opset() < 2 && ctx.has_input(1))) {
    const Tensor* s = ctx.optional_input(1);
    if (s && s->numel() > 0) {  // an empty split tensor counts as omitted
      MRT_CHECK_ARG(s->rank() == 1, "split must be 1-D, got ", s->describe());
      sizes = read_int64s(*s, "split");
      have_split = true;
    }
  } else if (node.has_attr("split")) {
    sizes = node.attr_ints("split");
    have_split = true;
  }
  if (have_split) {
    MRT_CHECK_ARG(sizes.size() == nout, "split ", shape_str(sizes), " has ", sizes.size(), " entries for ", nout,
                  " outputs");
    int64_t sum = 0;
    for (int64_t s : sizes) {
      MRT_CHECK_ARG(s >= 0, "split ", shape_str(sizes), " has a negative entry");
      MRT_CHECK_ARG(s <= dim - sum, "split ", shape_str(sizes), " sums past axis ", axis, " of ", x.describe());
      sum += s;
    }
    MRT_CHECK_ARG(sum == dim, "split ", shape_str(sizes), " sums to ", sum, " but axis ", axis, " of ", x.describe(),
                  " has size ", dim);
  } else {
    int64_t parts = static_cast<int64_t>(nout);
    if (ctx.opset() >= 18 && node.has_attr("num_outputs")) {
      parts = node.attr_int("num_outputs", 0);
      MRT_CHECK_ARG(parts == static_cast<int64_t>(nout), "num_outputs ", parts, " differs from the ", nout,
                    " outputs of the node");
      int64_t chunk = (dim + parts - 1) / parts;
      MRT_CHECK_ARG(chunk * (parts - 1) <= dim, "cannot split size ", dim, " into ", parts, " chunks");
      sizes.assign(static_cast<size_t>(parts), chunk);
      sizes.back() = dim - chunk * (parts - 1);
    } else {
      MRT_CHECK_ARG(dim % parts == 0, "axis ", axis, " of ", x.describe(), " cannot be split into ", parts,
                    " equal parts");
      sizes.assign(static_cast<size_t>(parts), dim / parts);
    }
  }
  size_t es = element_size(x, "Split");
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= x.dim(static_cast<size_t>(k));
  for (int64_t k = axis + 1; k < r; ++k) inner *= x.dim(static_cast<size_t>(k));
  const size_t in_row = static_cast<size_t>(dim * inner) * es;
  size_t col = 0;
  for (size_t i = 0; i < nout; ++i) {
    const size_t row = static_cast<size_t>(sizes[i] * inner) * es;
    if (ctx.has_output(i)) {
      Shape shp = x.shape();
      shp[static_cast<size_t>(axis)] = sizes[i];
      Tensor& y = ctx.output(i, x.dtype(), shp);
      if (row && outer) {
        char* dst = static_cast<char*>(y.raw());
        const char* src = static_cast<const char*>(x.raw()) + col;
        maybe_parallel(ctx, outer, y.numel(), [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o)
            std::memcpy(dst + static_cast<size_t>(o) * row, src + static_cast<size_t>(o) * in_row, row);
        });
      }
    }
    col += row;
  }
}

// ---- Slice -----------------------------------------------------------------------------------

void slice_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  const int64_t r = static_cast<int64_t>(x.rank());
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = node.require_ints("starts");
    ends = node.require_ints("ends");
    axes = node.attr_ints("axes");
  } else {
    starts = read_int64s(ctx.input(1), "starts");
    ends = read_int64s(ctx.input(2), "ends");
    if (const Tensor* a = ctx.optional_input(3)) axes = read_int64s(*a, "axes");
    if (const Tensor* s = ctx.optional_input(4)) steps = read_int64s(*s, "steps");
  }
  MRT_CHECK_ARG(starts.size() == ends.size(), "starts ", shape_str(starts), " and ends ", shape_str(ends),
                " differ in length");
  if (axes.empty() && !(ctx.opset() >= 10 && ctx.has_input(3))) {
    MRT_CHECK_ARG(static_cast<int64_t>(starts.size()) <= r, "starts ", shape_str(starts),
                  " is longer than the rank of ",
                  x.describe());
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  MRT_CHECK_ARG(axes.size() == starts.size(), "axes ", shape_str(axes), " and starts ", shape_str(starts),
                " differ in length");
  if (steps.empty()) steps.assign(starts.size(), 1);
  MRT_CHECK_ARG(steps.size() == starts.size(), "steps ", shape_str(steps), " and starts ", shape_str(starts),
                " differ in length");

  Shape out = x.shape();
  std::vector<int64_t> in_strides = shape_strides(x.shape());
  std::vector<int64_t> strides = in_strides;
  std::vector<bool> used(static_cast<size_t>(r), false);
  int64_t offset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = checked_axis(axes[i], r, "axes entry");
    MRT_CHECK_ARG(!used[static_cast<size_t>(a)], "axes ", shape_str(axes), " repeat an axis");
    used[static_cast<size_t>(a)] = true;
    const int64_t d = x.dim(static_cast<size_t>(a));
    const int64_t step = steps[i];
    MRT_CHECK_ARG(step != 0, "steps must not be 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += d;
    if (e < 0) e += d;
    // Steps beyond the dim size select at most one element; bound them so that no
    // arithmetic below can overflow.
    const int64_t bstep = std::clamp<int64_t>(step, -d - 1, d + 1);
    int64_t count;
    if (d == 0) {
      count = 0;
    } else if (bstep > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      count = e > s ? (e - s - 1) / bstep + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      count = s > e ? (s - e - 1) / (-bstep) + 1 : 0;
    }
    out[static_cast<size_t>(a)] = count;
    if (count > 0) offset += s * in_strides[static_cast<size_t>(a)];
    const int64_t st = in_strides[static_cast<size_t>(a)];
    strides[static_cast<size_t>(a)] = count > 1 ? bstep * st : st;
  }
  if (out == x.shape() && strides == in_strides) {  // the whole tensor, in order
    ctx.set_output(0, x);
    return;
  }
  size_t es = element_size(x, "Slice");
  Tensor& y = ctx.output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  strided_copy(ctx, es, out, strides, x.raw(), offset, y.raw());
}

// ---- Expand / Tile ----------------------------------------------------------------------------

void expand_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  MRT_CHECK_ARG(s.rank() == 1, "shape must be 1-D, got ", s.describe());
  Shape req = read_int64s(s, "shape");
  for (int64_t d : req) MRT_CHECK_ARG(d >= 0, "shape ", shape_str(req), " has a negative dimension");
  Shape out = broadcast_shapes(x.shape(), req);
  std::vector<int64_t> xs = shape_strides(x.shape());
  std::vector<int64_t> strides(out.size(), 0);
  const size_t lead = out.size() - x.rank();
  for (size_t i = 0; i < x.rank(); ++i) strides[lead + i] = x.dim(i) == 1 ? 0 : xs[i];
  if (shape_size(out) == x.numel()) {  // nothing is repeated: same bytes, new shape
    ctx.set_output(0, Tensor::reshaped(x, out));
    return;
  }
  size_t es = element_size(x, "Expand");
  Tensor& y = ctx.output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  strided_copy(ctx, es, out, strides, x.raw(), 0, y.raw());
}

void tile_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rt = ctx.input(1);
  MRT_CHECK_ARG(rt.rank() == 1, "repeats must be 1-D, got ", rt.describe());
  std::vector<int64_t> reps = read_int64s(rt, "repeats");
  MRT_CHECK_ARG(reps.size() == x.rank(), "repeats ", shape_str(reps), " must have one entry per dim of ",
                x.describe());
  std::vector<int64_t> xs = shape_strides(x.shape());
  Shape out(x.rank()), ext;
  std::vector<int64_t> strides;
  for (size_t i = 0; i < x.rank(); ++i) {
    MRT_CHECK_ARG(reps[i] >= 0, "repeats ", shape_str(reps), " has a negative entry");
    MRT_CHECK_ARG(x.dim(i) == 0 || reps[i] <= std::numeric_limits<int64_t>::max() / x.dim(i), "repeats ",
                  shape_str(reps), " make ", x.describe(), " too large");
    out[i] = x.dim(i) * reps[i];
    ext.push_back(reps[i]);
    strides.push_back(0);
    ext.push_back(x.dim(i));
    strides.push_back(xs[i]);
  }
  if (shape_size(out) == x.numel()) {
    ctx.set_output(0, Tensor::reshaped(x, out));
    return;
  }
  size_t es = element_size(x, "Tile");
  Tensor& y = ctx.output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  strided_copy(ctx, es, ext, strides, x.raw(), 0, y.raw());
}

// ---- Pad -------------------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

PadMode pad_mode(const Node& node) {
  std::string m = node.attr_string("mode", "constant");
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "edge") return PadMode::kEdge;
  if (m == "wrap") return PadMode::kWrap;
  fail(MRT_NOT_IMPLEMENTED, node.label(), ": Pad mode '", m, "' is not supported");
}

void pad_check(const Node& node, int64_t) { (void)pad_mode(node); }

void pad_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  const PadMode mode = pad_mode(node);
  const size_t r = x.rank();
  size_t es = element_size(x, "Pad");
  std::vector<int64_t> pads, axes;
  unsigned char cval[8] = {0};
  if (ctx.opset() < 11) {
    pads = node.has_attr("pads") ? node.attr_ints("pads") : node.require_ints("paddings");
    store_scalar(x.dtype(), node.attr_float("value", 0.f), cval);
  } else {
    const Tensor& p = ctx.input(1);
    MRT_CHECK_ARG(p.rank() == 1, "pads must be 1-D, got ", p.describe());
    pads = read_int64s(p, "pads");
    if (const Tensor* c = ctx.optional_input(2)) {
      if (c->numel() > 0) {
        MRT_CHECK_ARG(c->numel() == 1, "constant_value must be a scalar, got ", c->describe());
        MRT_CHECK_ARG(c->dtype() == x.dtype(), "constant_value ", c->describe(), " must have the type of the data ",
                      x.describe());
        std::memcpy(cval, c->raw(), es);
      }
    }
    if (ctx.opset() >= 18)
      if (const Tensor* a = ctx.optional_input(3)) axes = read_int64s(*a, "axes");
  }
  constexpr int64_t kMaxPad = int64_t(1) << 40;
  for (int64_t p : pads) MRT_CHECK_ARG(p > -kMaxPad && p < kMaxPad, "pads ", shape_str(pads), " are out of range");
  std::vector<int64_t> pb(r, 0), pe(r, 0);
  if (axes.empty()) {
    MRT_CHECK_ARG(pads.size() == 2 * r, "pads ", shape_str(pads), " must have ", 2 * r, " entries for ",
                  x.describe());
    for (size_t i = 0; i < r; ++i) {
      pb[i] = pads[i];
      pe[i] = pads[i + r];
    }
  } else {
    MRT_CHECK_ARG(pads.size() == 2 * axes.size(), "pads ", shape_str(pads), " must have ", 2 * axes.size(),
                  " entries for axes ", shape_str(axes));
    std::vector<bool> used(r, false);
    for (size_t i = 0; i < axes.size(); ++i) {
      size_t a = static_cast<size_t>(checked_axis(axes[i], static_cast<int64_t>(r), "axes entry"));
      MRT_CHECK_ARG(!used[a], "axes ", shape_str(axes), " repeat an axis");
      used[a] = true;
      pb[a] = pads[i];
      pe[a] = pads[i + axes.size()];
    }
  }
  if (std::all_of(pb.begin(), pb.end(), [](int64_t v) { return v == 0; }) &&
      std::all_of(pe.begin(), pe.end(), [](int64_t v) { return v == 0; })) {
    ctx.set_output(0, x);
    return;
  }
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    const int64_t d = x.dim(k);
    out[k] = d + pb[k] + pe[k];
    MRT_CHECK_ARG(out[k] >= 0, "pads ", shape_str(pads), " remove more than axis ", k, " of ", x.describe(), " holds");
    MRT_CHECK_ARG(mode == PadMode::kConstant || d > 0 || out[k] == 0, "cannot pad the empty axis ", k, " of ",
                  x.describe(), " in mode '", node.attr_string("mode", "constant"), "'");
  }
  // The output first: its allocation checks the size against the tensor limit, which then bounds the
  // per-axis maps (an empty output needs none).
  Tensor& y = ctx.output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  // Per axis: output index -> source index, or -1 for the constant.
  std::vector<std::vector<int64_t>> maps(r);
  for (size_t k = 0; k < r; ++k) {
    const int64_t d = x.dim(k);
    maps[k].resize(static_cast<size_t>(out[k]));
    for (int64_t o = 0; o < out[k]; ++o) {
      int64_t s = o - pb[k];
      if (s < 0 || s >= d) {
        switch (mode) {
          case PadMode::kConstant: s = -1; break;
          case PadMode::kEdge: s = s < 0 ? 0 : d - 1; break;
          case PadMode::kWrap: s = ((s % d) + d) % d; break;
          case PadMode::kReflect: {
            if (d == 1) {
              s = 0;
            } else {
              const int64_t period = 2 * (d - 1);
              s = ((s % period) + period) % period;
              if (s >= d) s = period - s;
            }
            break;
          }
        }
      }
      maps[k][static_cast<size_t>(o)] = s;
    }
  }
  gather_by_axis_maps(ctx, x, maps, cval, y);
}

// ---- DepthToSpace / SpaceToDepth ---------------------------------------------------------------

bool crd_mode(const Node& node) {
  std::string m = node.attr_string("mode", "DCR");
  if (m == "DCR") return false;
  if (m == "CRD") return true;
  fail(MRT_NOT_IMPLEMENTED, node.label(), ": mode '", m, "' is not supported");
}

void d2s_check(const Node& node, int64_t) { (void)crd_mode(node); }

void depth_to_space_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  MRT_CHECK_ARG(x.rank() == 4, "input must be 4-D (NCHW), got ", x.describe());
  const int64_t b = ctx.node().require_int("blocksize");
  MRT_CHECK_ARG(b > 0 && b <= (int64_t(1) << 20), "blocksize must be positive, got ", b);
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  MRT_CHECK_ARG(C % (b * b) == 0, "channels ", C, " of ", x.describe(), " are not divisible by blocksize^2 = ", b * b);
  const int64_t c = C / (b * b);
  const bool crd = ctx.opset() >= 11 && crd_mode(ctx.node());
  Shape tmp;
  std::vector<int64_t> perm;
  if (crd) {
    tmp = {N, c, b, b, H, W};
    perm = {0, 1, 4, 2, 5, 3};
  } else {
    tmp = {N, b, b, c, H, W};
    perm = {0, 3, 4, 1, 5, 2};
  }
  size_t es = element_size(x, "DepthToSpace");
  Tensor& y = ctx.output(0, x.dtype(), {N, c, H * b, W * b});
  if (y.numel() == 0) return;
  transpose_copy(ctx, es, tmp, perm, x.raw(), y.raw());
}

void space_to_depth_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  MRT_CHECK_ARG(x.rank() == 4, "input must be 4-D (NCHW), got ", x.describe());
  const int64_t b = ctx.node().require_int("blocksize");
  MRT_CHECK_ARG(b > 0 && b <= (int64_t(1) << 20), "blocksize must be positive, got ", b);
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  MRT_CHECK_ARG(H % b == 0 && W % b == 0, "spatial dims of ", x.describe(), " are not divisible by blocksize ", b);
  const bool crd = crd_mode(ctx.node());
  Shape tmp = {N, C, H / b, b, W / b, b};
  std::vector<int64_t> perm = crd ? std::vector<int64_t>{0, 1, 3, 5, 2, 4} : std::vector<int64_t>{0, 3, 5, 1, 2, 4};
  size_t es = element_size(x, "SpaceToDepth");
  Tensor& y = ctx.output(0, x.dtype(), {N, C * b * b, H / b, W / b});
  if (y.numel() == 0) return;
  transpose_copy(ctx, es, tmp, perm, x.raw(), y.raw());
}

// ---- Trilu -----------------------------------------------------------------------------------

void trilu_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  MRT_CHECK_ARG(x.rank() >= 2, "input must have rank >= 2, got ", x.describe());
  int64_t k = 0;
  if (const Tensor* kt = ctx.optional_input(1)) {
    MRT_CHECK_ARG(kt->numel() == 1, "k must be a scalar, got ", kt->describe());
    k = kt->int_at(0);
  }
  const bool upper = ctx.node().attr_int("upper", 1) != 0;
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  k = std::clamp<int64_t>(k, -rows - 1, cols + 1);
  size_t es = element_size(x, "Trilu");
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  if (y.numel() == 0) return;
  const int64_t mats = y.numel() / (rows * cols);
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(y.raw());
  maybe_parallel(ctx, mats * rows, y.numel(), [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t i = it % rows;
      // Kept columns are [lo, hi).
      int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
      int64_t hi = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      if (hi < lo) hi = lo;
      const size_t row_off = static_cast<size_t>(it * cols) * es;
      if (lo > 0) std::memset(dst + row_off, 0, static_cast<size_t>(lo) * es);
      if (hi > lo)
        std::memcpy(dst + row_off + static_cast<size_t>(lo) * es, src + row_off + static_cast<size_t>(lo) * es,
                    static_cast<size_t>(hi - lo) * es);
      if (hi < cols) std::memset(dst + row_off + static_cast<size_t>(hi) * es, 0, static_cast<size_t>(cols - hi) * es);
    }
  });
}

// ---- ReverseSequence ----------------------------------------------------------------------------

void reverse_sequence_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& lens_t = ctx.input(1);
  MRT_CHECK_ARG(x.rank() >= 2, "input must have rank >= 2, got ", x.describe());
  const int64_t ta = ctx.node().attr_int("time_axis", 0), ba = ctx.node().attr_int("batch_axis", 1);
  MRT_CHECK_ARG((ta == 0 && ba == 1) || (ta == 1 && ba == 0), "time_axis ", ta, " and batch_axis ", ba,
                " must be 0 and 1 in some order");
  const int64_t T = x.dim(static_cast<size_t>(ta)), B = x.dim(static_cast<size_t>(ba));
  std::vector<int64_t> lens = read_int64s(lens_t, "sequence_lens");
  MRT_CHECK_ARG(lens_t.rank() == 1 && static_cast<int64_t>(lens.size()) == B, "sequence_lens ",
                lens_t.describe(), " must have one entry per batch (", B, ")");
  for (int64_t l : lens)
    MRT_CHECK_ARG(l >= 0 && l <= T, "sequence length ", l, " is out of range [0, ", T, "]");
  size_t es = element_size(x, "ReverseSequence");
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  if (y.numel() == 0) return;
  const int64_t inner = y.numel() / (T * B);
  const size_t block = static_cast<size_t>(inner) * es;
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(y.raw());
  auto at = [&](int64_t t, int64_t b) { return static_cast<size_t>(ta == 0 ? t * B + b : b * T + t) * block; };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      int64_t st = t < lens[static_cast<size_t>(b)] ? lens[static_cast<size_t>(b)] - 1 - t : t;
      std::memcpy(dst + at(t, b), src + at(st, b), block);
    }
}

}  // namespace

void register_copy_ops(KernelRegistry& r) {
  r.add("Transpose", 1, transpose_kernel);
  r.add("Concat", 1, concat_kernel);
  r.add("Split", 1, split_kernel);
  r.add("Slice", 1, slice_kernel);
  r.add("Expand", 8, expand_kernel);
  r.add("Tile", 6, tile_kernel);
  r.add("Pad", 1, pad_kernel, pad_check);
  r.add("DepthToSpace", 1, depth_to_space_kernel, d2s_check);
  r.add("SpaceToDepth", 1, space_to_depth_kernel, d2s_check);
  r.add("Trilu", 14, trilu_kernel);
  r.add("ReverseSequence", 10, reverse_sequence_kernel);
}

}  // namespace shape_kernels
}  // namespace mrt
