// Dense tensors: element type, shape and a reference-counted, 64-byte aligned buffer.
// Views (Reshape, Identity, Squeeze, ...) share the buffer with their source.
//
// String tensors hold one pointer per element to an immutable std::string (nullptr reads as ""), so
// every kernel that moves elements by their size (Gather, Concat, Transpose, Where, ...) moves strings
// unchanged. The strings live in stores that buffers keep alive: set_string adds to the tensor's own
// store; the executor lets each string output keep the stores of the node's inputs (adopt_strings),
// since its elements can only be new strings or the inputs' strings.
//
// ONNX sequence and optional values travel through the executor as Tensors too: DType::kSequence
// holds an immutable Sequence of tensors (or of maps), DType::kNone is an optional without a value,
// DType::kMap a map (its keys and values tensors). None has elements or a buffer; an optional with a
// value is the value itself.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "dtype.h"

namespace mrt {

using Shape = std::vector<int64_t>;

class Allocator;

// A raw allocation. When `pool` is set the memory goes back to it for reuse.
struct Buffer {
  void* data = nullptr;
  size_t bytes = 0;
  bool owned = true;  // false: borrowed from the caller, never freed here
  std::shared_ptr<Allocator> pool;
  // String tensors: the stores of the strings the elements point to (see the top of this file).
  std::vector<std::shared_ptr<const void>> keep;
  std::shared_ptr<std::deque<std::string>> own_strings;  // where set_string adds
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
};

// Size-bucketed free lists: buffers whose tensors died are reused by later
// allocations of the same rounded size (memory reuse by tensor lifetime). A session's runs allocate
// through its RunArena (run_arena.h), which places them by a memory plan and falls back to this.
class Allocator : public std::enable_shared_from_this<Allocator> {
 public:
  Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;
  virtual std::shared_ptr<Buffer> allocate(size_t bytes);
  virtual void release(void* data, size_t bytes);  // called by ~Buffer
  void trim();  // returns the free lists' memory to the system
  virtual ~Allocator();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  friend struct Buffer;
};

// Number of elements of a shape; throws on negative dims or int64 overflow.
int64_t shape_size(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2,3,4]"
// Row-major strides in elements.
std::vector<int64_t> shape_strides(const Shape& shape);
// Multidirectional (numpy) broadcasting; throws INVALID_ARGUMENT naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Map a possibly negative axis into [0, rank); throws naming the op context string.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* what = "axis");

struct Sequence;

class Tensor {
 public:
  Tensor() = default;
  // Allocate an uninitialized tensor (from `alloc` when given, else the heap).
  Tensor(DType dtype, Shape shape, Allocator* alloc = nullptr);
  // Wrap caller-owned memory without copying; the caller keeps it alive.
  static Tensor borrow(DType dtype, Shape shape, void* data);
  // A view of `src` with another shape and the same number of elements.
  static Tensor reshaped(const Tensor& src, Shape shape);
  // A tensor of `dtype` and `shape` in src's storage from byte `byte_offset` on (sharing, and keeping alive,
  // src's buffer); throws unless it fits inside src.
  static Tensor view(const Tensor& src, DType dtype, Shape shape, size_t byte_offset);
  // Deep copy (a string tensor's copy has its own store with copies of the strings).
  Tensor clone(Allocator* alloc = nullptr) const;
  // An ONNX sequence of tensors of `elem_type` (kUndefined when not known); items are not copied.
  static Tensor sequence(DType elem_type, std::vector<Tensor> items);
  static Tensor none();  // an ONNX optional without a value
  // An ONNX map: 1-D keys (int64 or string) and values of the same length (not copied).
  static Tensor map(Tensor keys, Tensor values);
  bool is_sequence() const { return dtype_ == DType::kSequence; }
  bool is_none() const { return dtype_ == DType::kNone; }
  bool is_map() const { return dtype_ == DType::kMap; }
  bool is_tensor() const { return valid() && !is_sequence() && !is_none() && !is_map(); }
  const Sequence& seq() const;  // throws unless is_sequence()
  const Tensor& map_keys() const;  // throw unless is_map()
  const Tensor& map_values() const;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  bool valid() const { return dtype_ != DType::kUndefined; }

  void* raw() { return buffer_ ? static_cast<char*>(buffer_->data) + offset_ : nullptr; }
  const void* raw() const { return buffer_ ? static_cast<const char*>(buffer_->data) + offset_ : nullptr; }
  template <class T> T* data() { check_type<T>(); return static_cast<T*>(raw()); }
  template <class T> const T* data() const { check_type<T>(); return static_cast<const T*>(raw()); }
  // Untyped access for kernels that move bytes (any element type of the right size).
  template <class T> T* data_as() { return static_cast<T*>(raw()); }
  template <class T> const T* data_as() const { return static_cast<const T*>(raw()); }

  // Read element i of an integer tensor (int32/int64/...) as int64; throws for other types.
  int64_t int_at(int64_t i) const;
  // All elements of a 0-D/1-D integer tensor as int64 (for shape/axes inputs).
  std::vector<int64_t> to_int64_vector() const;
  // Element i converted to double (any numeric type).
  double scalar_as_double(int64_t i = 0) const;

  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  std::string describe() const;  // "float32[2,3]"

 private:
  template <class T> void check_type() const {
    if (DTypeOf<T>::value != dtype_)
      fail(MRT_INTERNAL, "tensor of type ", dtype_name(dtype_), " accessed as ", dtype_name(DTypeOf<T>::value));
  }
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
  std::shared_ptr<const Sequence> seq_;
};

struct Sequence {
  DType elem_type = DType::kUndefined;
  std::vector<Tensor> items;
};

// String elements (see the top of this file). set_string must not run concurrently on one tensor.
const std::string& string_at(const Tensor& t, int64_t i);
void set_string(Tensor& t, int64_t i, std::string s);
// `dst`'s elements may point to strings of `src` (string tensors, or a sequence's string items):
// dst's buffer keeps src's stores alive.
void keep_strings(Tensor& dst, const Tensor& src);
// After a kernel ran: every new string output keeps the stores of every input, so the strings it took
// from them stay alive as long as it does. Kernels that build sequence items of strings from copied
// elements call keep_strings on the items themselves.
void adopt_strings(std::vector<Tensor>& outputs, const std::vector<const Tensor*>& inputs);

}  // namespace mrt
