#include "tensor.h"

#include "resource_limits.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <unordered_map>

namespace mrt {

namespace {
constexpr size_t kAlign = 64;
// Free lists hold at most this many bytes in total; beyond it memory is returned to the OS.
constexpr size_t kPoolCapBytes = size_t(1) << 30;

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

void* aligned_alloc_bytes(size_t bytes) {
  size_t n = round_up(bytes == 0 ? 1 : bytes);
#if defined(_WIN32)
  void* p = _aligned_malloc(n, kAlign);
#else
  void* p = std::aligned_alloc(kAlign, n);
#endif
  if (!p) fail(MRT_OUT_OF_MEMORY, "failed to allocate ", bytes, " bytes");
  return p;
}

void aligned_free_bytes(void* p) {
#if defined(_WIN32)
  _aligned_free(p);
#else
  std::free(p);
#endif
}
}  // namespace

struct Allocator::Impl {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_lists;
  size_t pooled_bytes = 0;
  bool alive = true;
};

Buffer::~Buffer() {
  if (!owned || !data) return;
  if (pool) {
    pool->release(data, bytes);
  } else {
    aligned_free_bytes(data);
  }
}

Allocator::Allocator() : impl_(std::make_shared<Impl>()) {}

std::shared_ptr<Buffer> Allocator::allocate(size_t bytes) {
  size_t key = round_up(bytes == 0 ? 1 : bytes);
  auto buf = std::make_shared<Buffer>();
  buf->bytes = key;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->free_lists.find(key);
    if (it != impl_->free_lists.end() && !it->second.empty()) {
      buf->data = it->second.back();
      it->second.pop_back();
      impl_->pooled_bytes -= key;
    }
  }
  if (!buf->data) buf->data = aligned_alloc_bytes(key);
  buf->pool = shared_from_this();
  return buf;
}

void Allocator::release(void* data, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->pooled_bytes + bytes <= kPoolCapBytes) {
      impl_->free_lists[bytes].push_back(data);
      impl_->pooled_bytes += bytes;
      return;
    }
  }
  aligned_free_bytes(data);
}

void Allocator::trim() {
  std::unordered_map<size_t, std::vector<void*>> lists;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    lists.swap(impl_->free_lists);
    impl_->pooled_bytes = 0;
  }
  for (auto& kv : lists)
    for (void* p : kv.second) aligned_free_bytes(p);
}

Allocator::~Allocator() {
  if (impl_) trim();
}

int64_t shape_size(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail(MRT_INVALID_ARGUMENT, "negative dimension in shape ", shape_str(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      fail(MRT_INVALID_ARGUMENT, "shape ", shape_str(shape), " has too many elements");
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<int64_t> shape_strides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      fail(MRT_INVALID_ARGUMENT, "shapes ", shape_str(a), " and ", shape_str(b), " cannot be broadcast together");
    }
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* what) {
  if (rank == 0) {
    if (axis == 0 || axis == -1) return 0;
    fail(MRT_INVALID_ARGUMENT, what, " ", axis, " is out of range for a scalar");
  }
  if (axis < -rank || axis >= rank) fail(MRT_INVALID_ARGUMENT, what, " ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

Tensor::Tensor(DType dtype, Shape shape, Allocator* alloc) : dtype_(dtype), shape_(std::move(shape)) {
  if (!dtype_is_storable(dtype))
    fail(MRT_NOT_IMPLEMENTED, "tensors of element type ", dtype_name(dtype), " are not supported");
  numel_ = shape_size(shape_);
  size_t esz = dtype_size(dtype);
  if (numel_ > 0 && static_cast<uint64_t>(numel_) > std::numeric_limits<size_t>::max() / esz / 2)
    fail(MRT_OUT_OF_MEMORY, "tensor ", shape_str(shape_), " is too large");
  size_t bytes = static_cast<size_t>(numel_) * esz;
  const Limits& limits = current_limits();
  if (bytes > limits.max_tensor_bytes)
    fail(MRT_OUT_OF_MEMORY, "tensor ", shape_str(shape_), " of ", dtype_name(dtype), " needs ", bytes,
         " bytes, over the limit of ", limits.max_tensor_bytes,
         " bytes per tensor (session.max_tensor_bytes / MOSAICRT_MAX_TENSOR_BYTES)");
  if (alloc) {
    buffer_ = alloc->allocate(bytes);
  } else {
    buffer_ = std::make_shared<Buffer>();
    buffer_->data = aligned_alloc_bytes(bytes);
    buffer_->bytes = bytes;
  }
  if (dtype == DType::kString && bytes) std::memset(buffer_->data, 0, bytes);  // every element reads as ""
}

Tensor Tensor::borrow(DType dtype, Shape shape, void* data) {
  Tensor t;
  if (!dtype_is_plain(dtype))
    fail(MRT_NOT_IMPLEMENTED, "borrowed tensors of element type ", dtype_name(dtype), " are not supported");
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_size(t.shape_);
  t.buffer_ = std::make_shared<Buffer>();
  // An empty tensor may arrive with no data pointer (an empty std::vector, a NULL from C): give it a
  // valid one, as owned empty tensors have, so kernels may form p + 0 * stride without UB.
  alignas(64) static unsigned char empty_data[64];
  t.buffer_->data = data == nullptr && t.numel_ == 0 ? empty_data : data;
  t.buffer_->bytes = t.nbytes();
  t.buffer_->owned = false;
  return t;
}

Tensor Tensor::reshaped(const Tensor& src, Shape shape) {
  int64_t n = shape_size(shape);
  if (n != src.numel_)
    fail(MRT_INVALID_ARGUMENT, "cannot reshape ", src.describe(), " to ", shape_str(shape), " (", src.numel_,
         " vs ", n, " elements)");
  Tensor t = src;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::view(const Tensor& src, DType dtype, Shape shape, size_t byte_offset) {
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = shape_size(shape);
  t.shape_ = std::move(shape);
  if (!src.is_tensor() || dtype == DType::kString || src.dtype() == DType::kString ||
      byte_offset > src.nbytes() || t.nbytes() > src.nbytes() - byte_offset)
    fail(MRT_INTERNAL, "a view of ", t.nbytes(), " bytes at byte ", byte_offset, " does not fit in ", src.describe());
  t.buffer_ = src.buffer_;
  t.offset_ = src.offset_ + byte_offset;
  return t;
}

Tensor Tensor::clone(Allocator* alloc) const {
  if (!is_tensor()) return *this;  // sequences and none are immutable
  Tensor t(dtype_, shape_, alloc);
  if (dtype_ == DType::kString) {
    for (int64_t i = 0; i < numel_; ++i) set_string(t, i, string_at(*this, i));
  } else if (nbytes()) {
    std::memcpy(t.raw(), raw(), nbytes());
  }
  return t;
}

Tensor Tensor::sequence(DType elem_type, std::vector<Tensor> items) {
  for (const Tensor& item : items) {
    if (!item.is_tensor() && !item.is_map())
      fail(MRT_INVALID_ARGUMENT, "a sequence holds tensors or maps, got ", item.describe());
    if (elem_type == DType::kUndefined) elem_type = item.dtype();
    if (item.dtype() != elem_type)
      fail(MRT_INVALID_ARGUMENT, "a sequence of ", dtype_name(elem_type), " tensors cannot hold ", item.describe());
  }
  Tensor t;
  t.dtype_ = DType::kSequence;
  auto seq = std::make_shared<Sequence>();
  seq->elem_type = elem_type;
  seq->items = std::move(items);
  t.seq_ = std::move(seq);
  return t;
}

Tensor Tensor::map(Tensor keys, Tensor values) {
  if (!keys.is_tensor() || !values.is_tensor() || keys.rank() != 1 || values.rank() != 1 ||
      keys.numel() != values.numel())
    fail(MRT_INVALID_ARGUMENT, "a map needs 1-D keys and values of one length, got ", keys.describe(), " and ",
         values.describe());
  if (keys.dtype() != DType::kInt64 && keys.dtype() != DType::kString)
    fail(MRT_INVALID_ARGUMENT, "map keys must be int64 or string, got ", keys.describe());
  Tensor t;
  t.dtype_ = DType::kMap;
  auto pair = std::make_shared<Sequence>();
  pair->elem_type = values.dtype();
  pair->items = {std::move(keys), std::move(values)};
  t.seq_ = std::move(pair);
  return t;
}

const Tensor& Tensor::map_keys() const {
  if (!is_map()) fail(MRT_INVALID_ARGUMENT, "expected a map, got ", describe());
  return seq_->items[0];
}

const Tensor& Tensor::map_values() const {
  if (!is_map()) fail(MRT_INVALID_ARGUMENT, "expected a map, got ", describe());
  return seq_->items[1];
}

Tensor Tensor::none() {
  Tensor t;
  t.dtype_ = DType::kNone;
  return t;
}

const Sequence& Tensor::seq() const {
  if (!is_sequence()) fail(MRT_INVALID_ARGUMENT, "expected a sequence, got ", describe());
  return *seq_;
}

const std::string& string_at(const Tensor& t, int64_t i) {
  static const std::string empty;
  const std::string* p = t.data_as<const std::string*>()[i];
  return p ? *p : empty;
}

void set_string(Tensor& t, int64_t i, std::string s) {
  if (t.dtype() != DType::kString) fail(MRT_INTERNAL, "set_string on a tensor of ", t.describe());
  Buffer& b = *t.buffer();
  if (!b.own_strings) {
    b.own_strings = std::make_shared<std::deque<std::string>>();
    b.keep.push_back(b.own_strings);
  }
  b.own_strings->push_back(std::move(s));
  t.data_as<const std::string*>()[i] = &b.own_strings->back();
}

void keep_strings(Tensor& dst, const Tensor& src) {
  if (src.is_sequence() || src.is_map()) {
    for (const Tensor& item : src.is_map() ? std::vector<Tensor>{src.map_keys(), src.map_values()} : src.seq().items)
      keep_strings(dst, item);
    return;
  }
  if (src.dtype() != DType::kString || !src.buffer() || !dst.buffer() || src.buffer() == dst.buffer()) return;
  std::vector<std::shared_ptr<const void>>& keep = dst.buffer()->keep;
  for (const auto& store : src.buffer()->keep)
    if (std::find(keep.begin(), keep.end(), store) == keep.end()) keep.push_back(store);
}

void adopt_strings(std::vector<Tensor>& outputs, const std::vector<const Tensor*>& inputs) {
  for (Tensor& out : outputs) {
    if (out.dtype() != DType::kString || !out.buffer()) continue;
    // A view of an input already holds that input's strings only; only new buffers adopt (so a
    // buffer that other runs may read is never changed here).
    bool view = false;
    for (const Tensor* in : inputs) view = view || (in && in->buffer() == out.buffer());
    if (view) continue;
    for (const Tensor* in : inputs)
      if (in) keep_strings(out, *in);
  }
}

int64_t Tensor::int_at(int64_t i) const {
  switch (dtype_) {
    case DType::kInt64: return data_as<int64_t>()[i];
    case DType::kInt32: return data_as<int32_t>()[i];
    case DType::kInt16: return data_as<int16_t>()[i];
    case DType::kInt8: return data_as<int8_t>()[i];
    case DType::kUInt8: return data_as<uint8_t>()[i];
    case DType::kUInt16: return data_as<uint16_t>()[i];
    case DType::kUInt32: return data_as<uint32_t>()[i];
    case DType::kUInt64: return static_cast<int64_t>(data_as<uint64_t>()[i]);
    case DType::kBool: return data_as<bool>()[i] ? 1 : 0;
    default: fail(MRT_INVALID_ARGUMENT, "expected an integer tensor, got ", describe());
  }
}

std::vector<int64_t> Tensor::to_int64_vector() const {
  if (rank() > 1) fail(MRT_INVALID_ARGUMENT, "expected a 0-D or 1-D integer tensor, got ", describe());
  std::vector<int64_t> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[static_cast<size_t>(i)] = int_at(i);
  return v;
}

double Tensor::scalar_as_double(int64_t i) const {
  if (i < 0 || i >= numel_) fail(MRT_INVALID_ARGUMENT, "element ", i, " out of range for ", describe());
  switch (dtype_) {
    case DType::kFloat: return data_as<float>()[i];
    case DType::kDouble: return data_as<double>()[i];
    case DType::kFloat16: return half_to_float(data_as<uint16_t>()[i]);
    case DType::kBFloat16: return bfloat16_to_float(data_as<uint16_t>()[i]);
    default: return static_cast<double>(int_at(i));
  }
}

std::string Tensor::describe() const {
  if (is_sequence()) return str_cat("sequence of ", seq_->items.size(), " ", dtype_name(seq_->elem_type), " tensors");
  if (is_none()) return "an optional without a value";
  if (is_map())
    return str_cat("map of ", seq_->items[0].numel(), " ", dtype_name(seq_->items[0].dtype()), " keys to ",
                   dtype_name(seq_->elem_type), " values");
  return str_cat(dtype_name(dtype_), shape_str(shape_));
}

}  // namespace mrt
