// A loaded shared library (dlopen / LoadLibrary), closed when the object goes away.
#pragma once
#include <string>

namespace mrt {

class DynLib {
 public:
  DynLib() = default;
  ~DynLib();
  DynLib(const DynLib&) = delete;
  DynLib& operator=(const DynLib&) = delete;

  // Loads `path` (a bare file name is searched the platform's way); throws MRT_EP_ERROR naming the file and, for a library built for another
  // machine, both machine types.
  void open(const std::string& path);
  // nullptr when the symbol is not exported.
  void* symbol(const char* name) const;
  bool is_open() const { return handle_ != nullptr; }

 private:
  void* handle_ = nullptr;
};

// "x86_64", "aarch64", "arm", ... of an ELF/PE file ("" when it is neither or unreadable).
std::string binary_machine(const std::string& path);
// The machine this library was compiled for, in binary_machine's words.
const char* this_machine();

}  // namespace mrt
