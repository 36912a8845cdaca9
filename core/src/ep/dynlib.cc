#include "ep/dynlib.h"

#include <cstdint>
#include <cstring>
#include <fstream>

#include "error.h"

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

namespace mrt {

namespace {

std::string last_error() {
#if defined(_WIN32)
  DWORD code = GetLastError();
  char buf[512] = {0};
  FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr, code, 0, buf, sizeof(buf),
                 nullptr);
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s + " (error " + std::to_string(code) + ")";
#else
  const char* e = dlerror();
  return e ? e : "unknown error";
#endif
}

std::string elf_machine_name(uint16_t m) {
  switch (m) {
    case 3: return "x86";
    case 40: return "arm";
    case 62: return "x86_64";
    case 183: return "aarch64";
    case 243: return "riscv";
    default: return "ELF machine " + std::to_string(m);
  }
}

std::string pe_machine_name(uint16_t m) {
  switch (m) {
    case 0x8664: return "x86_64";
    case 0xAA64: return "aarch64";
    case 0x14c: return "x86";
    case 0x1c4: return "arm";
    default: return "PE machine " + std::to_string(m);
  }
}

}  // namespace

const char* this_machine() {
#if defined(__x86_64__) || defined(_M_X64)
  return "x86_64";
#elif defined(__aarch64__) || defined(_M_ARM64)
  return "aarch64";
#elif defined(__arm__) || defined(_M_ARM)
  return "arm";
#elif defined(__i386__) || defined(_M_IX86)
  return "x86";
#else
  return "unknown";
#endif
}

std::string binary_machine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  unsigned char h[64] = {0};
  in.read(reinterpret_cast<char*>(h), sizeof(h));
  if (in.gcount() < 20) return "";
  if (h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F') {
    bool little = h[5] == 1;
    uint16_t m = little ? static_cast<uint16_t>(h[18] | (h[19] << 8)) : static_cast<uint16_t>((h[18] << 8) | h[19]);
    return elf_machine_name(m);
  }
  if (h[0] == 'M' && h[1] == 'Z') {
    uint32_t pe = static_cast<uint32_t>(h[60] | (h[61] << 8) | (h[62] << 16) | (static_cast<uint32_t>(h[63]) << 24));
    unsigned char sig[6] = {0};
    in.seekg(pe);
    in.read(reinterpret_cast<char*>(sig), sizeof(sig));
    if (in.gcount() == 6 && sig[0] == 'P' && sig[1] == 'E' && sig[2] == 0 && sig[3] == 0)
      return pe_machine_name(static_cast<uint16_t>(sig[4] | (sig[5] << 8)));
  }
  return "";
}

DynLib::~DynLib() {
  if (!handle_) return;
#if defined(_WIN32)
  FreeLibrary(static_cast<HMODULE>(handle_));
#else
  dlclose(handle_);
#endif
}

void DynLib::open(const std::string& path) {
  if (path.find_first_of("/\\") != std::string::npos) {  // a bare name is searched by the loader
    std::ifstream probe(path, std::ios::binary);
    if (!probe) fail(MRT_EP_ERROR, "EP library '", path, "' does not exist or cannot be read");
  }
#if defined(_WIN32)
  handle_ = LoadLibraryExA(path.c_str(), nullptr, LOAD_WITH_ALTERED_SEARCH_PATH);
#else
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
  if (handle_) return;
  std::string why = last_error();
  std::string machine = binary_machine(path);
  if (!machine.empty() && machine != this_machine())
    fail(MRT_EP_ERROR, "EP library '", path, "' is built for ", machine, " but this process runs on ", this_machine(),
         "; install the EP wheel for this platform");
  fail(MRT_EP_ERROR, "cannot load EP library '", path, "': ", why);
}

void* DynLib::symbol(const char* name) const {
  if (!handle_) return nullptr;
#if defined(_WIN32)
  return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(handle_), name));
#else
  return dlsym(handle_, name);
#endif
}

}  // namespace mrt
