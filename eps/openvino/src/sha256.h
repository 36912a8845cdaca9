// SHA-256 (FIPS 180-4), for the compiled-blob cache: keys and payload checksums.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mrt_ov {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(const std::string& s) { update(s.data(), s.size()); }
  std::string hex();  // finishes the hash

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t bits_ = 0;
};

}  // namespace mrt_ov
