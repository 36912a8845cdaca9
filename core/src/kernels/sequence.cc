// Sequence and optional operators: SequenceEmpty, SequenceConstruct, SequenceAt, SequenceInsert,
// SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement and
// OptionalGetElement. Sequences are immutable values (tensor.h): an insert or erase makes a new sequence
// that shares the unchanged items. SequenceMap runs a subgraph and lives with the control-flow kernels.
#include <cstring>

#include "../kernel.h"

namespace mrt {
namespace {

// A position input (int32/int64 scalar) inside [-n, hi]; negative counts from the back.
int64_t read_position(const Tensor& p, int64_t n, int64_t hi, const char* what) {
  MRT_CHECK_ARG(p.dtype() == DType::kInt32 || p.dtype() == DType::kInt64, what, " must be int32 or int64, got ",
                p.describe());
  MRT_CHECK_ARG(p.numel() == 1 && p.rank() <= 1, what, " must be a scalar, got ", p.describe());
  const int64_t pos = p.int_at(0);
  MRT_CHECK_ARG(pos >= -n && pos <= hi, what, " ", pos, " is out of range for a sequence of ", n, " tensors");
  return pos < 0 ? pos + n : pos;
}

DType elem_type_attr(const Node& n, const char* name, DType def) {
  const int64_t code = n.attr_int(name, static_cast<int64_t>(def));
  MRT_ENFORCE(dtype_is_known(static_cast<int32_t>(code)) && dtype_is_storable(static_cast<DType>(code)),
              MRT_NOT_IMPLEMENTED, n.label(), ": attribute ", name, " = ", code, " is not a supported element type");
  return static_cast<DType>(code);
}

void sequence_empty_check(const Node& n, int64_t) { (void)elem_type_attr(n, "dtype", DType::kFloat); }

void sequence_empty_kernel(OpContext& ctx) {
  ctx.set_output(0, Tensor::sequence(elem_type_attr(ctx.node(), "dtype", DType::kFloat), {}));
}

void sequence_construct_kernel(OpContext& ctx) {
  MRT_CHECK_ARG(ctx.input_count() >= 1, "SequenceConstruct takes at least one tensor");
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.input_count(); ++i) items.push_back(ctx.input(i));
  ctx.set_output(0, Tensor::sequence(DType::kUndefined, std::move(items)));
}

void sequence_at_kernel(OpContext& ctx) {
  const Sequence& s = ctx.input(0).seq();
  const int64_t n = static_cast<int64_t>(s.items.size());
  const int64_t pos = read_position(ctx.input(1), n, n - 1, "SequenceAt position");
  ctx.set_output(0, s.items[static_cast<size_t>(pos)]);
}

void sequence_insert_kernel(OpContext& ctx) {
  const Sequence& s = ctx.input(0).seq();
  const Tensor& t = ctx.input(1);
  const int64_t n = static_cast<int64_t>(s.items.size());
  const int64_t pos = ctx.has_input(2) ? read_position(ctx.input(2), n, n, "SequenceInsert position") : n;
  MRT_CHECK_ARG(s.elem_type == DType::kUndefined || t.dtype() == s.elem_type, "cannot insert ", t.describe(),
                " into a sequence of ", dtype_name(s.elem_type), " tensors");
  std::vector<Tensor> items = s.items;
  items.insert(items.begin() + pos, t);
  ctx.set_output(0, Tensor::sequence(s.elem_type, std::move(items)));
}

void sequence_erase_kernel(OpContext& ctx) {
  const Sequence& s = ctx.input(0).seq();
  const int64_t n = static_cast<int64_t>(s.items.size());
  MRT_CHECK_ARG(n > 0, "SequenceErase: the sequence is empty");
  const int64_t pos = ctx.has_input(1) ? read_position(ctx.input(1), n, n - 1, "SequenceErase position") : n - 1;
  std::vector<Tensor> items = s.items;
  items.erase(items.begin() + pos);
  ctx.set_output(0, Tensor::sequence(s.elem_type, std::move(items)));
}

void sequence_length_kernel(OpContext& ctx) {
  Tensor& y = ctx.output(0, DType::kInt64, Shape{});
  *y.data<int64_t>() = static_cast<int64_t>(ctx.input(0).seq().items.size());
}

// Copies x[..., start:start+len, ...] along `axis` into a new tensor (the axis dropped when !keep).
Tensor slice_along(OpContext& ctx, const Tensor& x, int64_t axis, int64_t start, int64_t len, bool keep) {
  Shape shape = x.shape();
  const int64_t full = shape[static_cast<size_t>(axis)];
  shape[static_cast<size_t>(axis)] = len;
  Tensor out(x.dtype(), shape, ctx.allocator());
  if (!keep) shape.erase(shape.begin() + axis);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const size_t esz = dtype_size(x.dtype());
  const size_t row = static_cast<size_t>(len * inner) * esz;
  for (int64_t o = 0; o < outer && row; ++o)
    std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>(o) * row,
                static_cast<const char*>(x.raw()) + static_cast<size_t>((o * full + start) * inner) * esz, row);
  keep_strings(out, x);
  return keep ? out : Tensor::reshaped(out, shape);
}

void split_to_sequence_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  MRT_CHECK_IMPL(dtype_size(x.dtype()) != 0, "SplitToSequence: element type ", dtype_name(x.dtype()),
                 " is not supported");
  MRT_CHECK_ARG(x.rank() >= 1, "SplitToSequence: the input must have rank >= 1, got ", x.describe());
  const int64_t axis = normalize_axis(ctx.node().attr_int("axis", 0), static_cast<int64_t>(x.rank()));
  const int64_t len = x.dim(static_cast<size_t>(axis));
  std::vector<int64_t> lengths;
  bool keep = true;
  if (const Tensor* split = ctx.optional_input(1)) {
    MRT_CHECK_ARG(split->dtype() == DType::kInt32 || split->dtype() == DType::kInt64,
                  "SplitToSequence: split must be int32 or int64, got ", split->describe());
    MRT_CHECK_ARG(split->rank() <= 1, "SplitToSequence: split must be a scalar or 1-D, got ", split->describe());
    if (split->rank() == 0) {
      const int64_t chunk = split->int_at(0);
      MRT_CHECK_ARG(chunk > 0, "SplitToSequence: split ", chunk, " must be positive");
      for (int64_t at = 0; at < len; at += chunk) lengths.push_back(std::min(chunk, len - at));
    } else {
      int64_t total = 0;
      for (int64_t v : split->to_int64_vector()) {
        MRT_CHECK_ARG(v >= 0, "SplitToSequence: split has a negative length ", v);
        lengths.push_back(v);
        total += v;
      }
      MRT_CHECK_ARG(total == len, "SplitToSequence: split lengths add up to ", total, " but axis ", axis, " of ",
                    x.describe(), " has ", len);
    }
  } else {
    lengths.assign(static_cast<size_t>(len), 1);
    keep = ctx.node().attr_int("keepdims", 1) != 0;
  }
  std::vector<Tensor> items;
  int64_t at = 0;
  for (int64_t l : lengths) {
    items.push_back(slice_along(ctx, x, axis, at, l, keep));
    at += l;
  }
  ctx.set_output(0, Tensor::sequence(x.dtype(), std::move(items)));
}

void concat_from_sequence_kernel(OpContext& ctx) {
  const Sequence& s = ctx.input(0).seq();
  MRT_CHECK_ARG(!s.items.empty(), "ConcatFromSequence: the sequence is empty");
  const bool new_axis = ctx.node().attr_int("new_axis", 0) != 0;
  MRT_ENFORCE(ctx.node().has_attr("axis"), MRT_INVALID_MODEL, ctx.node().label(), ": attribute axis is required");
  const Tensor& first = s.items[0];
  MRT_CHECK_IMPL(dtype_size(first.dtype()) != 0, "ConcatFromSequence: element type ", dtype_name(first.dtype()),
                 " is not supported");
  const int64_t rank = static_cast<int64_t>(first.rank()) + (new_axis ? 1 : 0);
  MRT_CHECK_ARG(rank >= 1, "ConcatFromSequence: cannot concatenate scalars without new_axis");
  const int64_t axis = normalize_axis(ctx.node().attr_int("axis", 0), rank);
  // Each item as a tensor of the output's rank.
  std::vector<Tensor> parts;
  int64_t total = 0;
  for (const Tensor& item : s.items) {
    MRT_CHECK_ARG(item.dtype() == first.dtype() && item.rank() == first.rank(), "ConcatFromSequence: items ",
                  first.describe(), " and ", item.describe(), " differ in type or rank");
    Shape shape = item.shape();
    if (new_axis) shape.insert(shape.begin() + axis, 1);
    for (size_t d = 0; d < shape.size(); ++d) {
      Shape ref = first.shape();
      if (new_axis) ref.insert(ref.begin() + axis, 1);
      MRT_CHECK_ARG(static_cast<int64_t>(d) == axis || shape[d] == ref[d], "ConcatFromSequence: items ",
                    first.describe(), " and ", item.describe(), " differ outside axis ", axis);
    }
    total += shape[static_cast<size_t>(axis)];
    parts.push_back(Tensor::reshaped(item, shape));
  }
  Shape out_shape = parts[0].shape();
  out_shape[static_cast<size_t>(axis)] = total;
  Tensor& y = ctx.output(0, first.dtype(), out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < out_shape.size(); ++d) inner *= out_shape[d];
  const size_t esz = dtype_size(first.dtype());
  char* dst = static_cast<char*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor& p : parts) {
      const size_t row = static_cast<size_t>(p.dim(static_cast<size_t>(axis)) * inner) * esz;
      if (!row) continue;
      std::memcpy(dst, static_cast<const char*>(p.raw()) + static_cast<size_t>(o) * row, row);
      dst += row;
    }
}

void optional_kernel(OpContext& ctx) {
  if (ctx.has_input(0)) {
    ctx.set_output(0, ctx.input(0));
    return;
  }
  MRT_ENFORCE(ctx.node().has_attr("type"), MRT_INVALID_MODEL, ctx.node().label(),
              ": Optional without an input needs the attribute type");
  ctx.set_output(0, Tensor::none());
}

void optional_has_element_kernel(OpContext& ctx) {
  Tensor& y = ctx.output(0, DType::kBool, Shape{});
  *y.data<bool>() = ctx.has_input(0) && !ctx.input(0).is_none();
}

void optional_get_element_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  MRT_CHECK_ARG(!x.is_none(), "OptionalGetElement: the optional has no value");
  ctx.set_output(0, x);
}

}  // namespace

void register_sequence_kernels(KernelRegistry& r) {
  r.add("SequenceEmpty", 11, sequence_empty_kernel, sequence_empty_check);
  r.add("SequenceConstruct", 11, sequence_construct_kernel);
  r.add("SequenceAt", 11, sequence_at_kernel);
  r.add("SequenceInsert", 11, sequence_insert_kernel);
  r.add("SequenceErase", 11, sequence_erase_kernel);
  r.add("SequenceLength", 11, sequence_length_kernel);
  r.add("SplitToSequence", 11, split_to_sequence_kernel);
  r.add("ConcatFromSequence", 11, concat_from_sequence_kernel);
  r.add("Optional", 15, optional_kernel);
  r.add("OptionalHasElement", 15, optional_has_element_kernel);
  r.add("OptionalGetElement", 15, optional_get_element_kernel);
}

}  // namespace mrt
