// Protobuf wire-format reader: bounds-checked, allocation-free. Every error names the
// absolute byte offset and the message path being decoded ("ModelProto.graph.node[3]").
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "../error.h"

namespace mrt::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

class Reader {
 public:
  // `base` is the absolute offset of data[0] in the whole model (for messages).
  Reader(const uint8_t* data, size_t size, size_t base, std::string path)
      : p_(data), end_(data + size), start_(data), base_(base), path_(std::move(path)) {}

  bool done() const { return p_ >= end_; }
  size_t offset() const { return base_ + static_cast<size_t>(p_ - start_); }
  const std::string& path() const { return path_; }

  // Reads a field key; returns false at end of message.
  bool next(uint32_t& field, WireType& type) {
    if (done()) return false;
    field_offset_ = offset();
    uint64_t key = varint();
    field = static_cast<uint32_t>(key >> 3);
    type = static_cast<WireType>(key & 7);
    if (field == 0 || key >> 32) error("invalid field number");
    if (type == kStartGroup || type == kEndGroup) error("groups are not supported in ONNX messages");
    if (type != kVarint && type != kFixed64 && type != kLengthDelimited && type != kFixed32)
      error(str_cat("invalid wire type ", static_cast<uint32_t>(type)));
    return true;
  }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) error("truncated varint");
      uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    error("varint longer than 10 bytes");
  }
  uint32_t fixed32() {
    need(4);
    uint32_t v;
    std::memcpy(&v, p_, 4);
    p_ += 4;
    return v;
  }
  uint64_t fixed64() {
    need(8);
    uint64_t v;
    std::memcpy(&v, p_, 8);
    p_ += 8;
    return v;
  }
  // A length-delimited payload: returns its bytes and absolute offset.
  struct Bytes {
    const uint8_t* data;
    size_t size;
    size_t offset;
  };
  Bytes bytes() {
    uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_))
      error(str_cat("length ", n, " runs past the end of the enclosing message (", end_ - p_, " bytes left)"));
    Bytes b{p_, static_cast<size_t>(n), offset()};
    p_ += n;
    return b;
  }
  std::string string() {
    Bytes b = bytes();
    return std::string(reinterpret_cast<const char*>(b.data), b.size);
  }
  Reader sub(const std::string& child_path) {
    Bytes b = bytes();
    return Reader(b.data, b.size, b.offset, path_ + "." + child_path);
  }
  void skip(WireType t) {
    switch (t) {
      case kVarint: varint(); break;
      case kFixed64: need(8); p_ += 8; break;
      case kFixed32: need(4); p_ += 4; break;
      case kLengthDelimited: bytes(); break;
      default: error("cannot skip field");
    }
  }
  void expect(WireType got, WireType want, const char* field) {
    if (got != want) error(str_cat("field '", field, "' has wire type ", static_cast<uint32_t>(got), ", expected ",
                                   static_cast<uint32_t>(want)));
  }

  [[noreturn]] void error(const std::string& what) const {
    fail(MRT_INVALID_MODEL, "malformed model at byte ", field_offset_ ? field_offset_ : offset(), " in ", path_, ": ",
         what);
  }

 private:
  void need(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) error("truncated fixed-size field");
  }
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* start_;
  size_t base_;
  size_t field_offset_ = 0;
  std::string path_;
};

}  // namespace mrt::wire
