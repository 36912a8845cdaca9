#include "resource_limits.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "error.h"

#if defined(_WIN32)
#include <windows.h>
#else
#include <unistd.h>
#endif

namespace mrt {

namespace {

uint64_t physical_memory_bytes() {
#if defined(_WIN32)
  MEMORYSTATUSEX status{};
  status.dwLength = sizeof(status);
  if (GlobalMemoryStatusEx(&status)) return status.ullTotalPhys;
#else
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
#endif
  return uint64_t(1) << 40;
}

// A positive integer, or fail naming where it came from.
int64_t parse_limit(const std::string& text, const char* where) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v <= 0)
    fail(MRT_INVALID_ARGUMENT, where, " must be a positive integer, got '", text, "'");
  return v;
}

struct Field {
  const char* env;
  const char* config;
  void (*set)(Limits&, int64_t);
};

const Field kFields[] = {
    {"MOSAICRT_MAX_TENSOR_BYTES", "session.max_tensor_bytes",
     [](Limits& l, int64_t v) { l.max_tensor_bytes = static_cast<uint64_t>(v); }},
    {"MOSAICRT_MAX_NODES", "session.max_nodes", [](Limits& l, int64_t v) { l.max_nodes = v; }},
    {"MOSAICRT_MAX_GRAPH_DEPTH", "session.max_graph_depth",
     [](Limits& l, int64_t v) {
       l.max_graph_depth = static_cast<int32_t>(v > 256 ? 256 : v);  // deeper would risk the stack itself
     }},
    {"MOSAICRT_MAX_NODE_ATTRIBUTES", "session.max_node_attributes",
     [](Limits& l, int64_t v) { l.max_node_attributes = v; }},
};

Limits from_environment() {
  Limits l{physical_memory_bytes(), 1000000, 32, 1024};
  for (const Field& f : kFields) {
    const char* value = std::getenv(f.env);
    if (!value || !*value) continue;
    try {
      f.set(l, parse_limit(value, f.env));
    } catch (const Error&) {
      // A malformed environment value must not make every session fail: keep the default.
    }
  }
  return l;
}

thread_local const Limits* t_current = nullptr;

}  // namespace

const Limits& Limits::process() {
  static const Limits limits = from_environment();
  return limits;
}

Limits Limits::for_session(const std::map<std::string, std::string>& config) {
  Limits l = process();
  for (const Field& f : kFields) {
    auto it = config.find(f.config);
    if (it != config.end()) f.set(l, parse_limit(it->second, f.config));
  }
  return l;
}

LimitsScope::LimitsScope(const Limits& limits) : previous_(t_current) { t_current = &limits; }
LimitsScope::~LimitsScope() { t_current = previous_; }

const Limits& current_limits() { return t_current ? *t_current : Limits::process(); }

size_t checked_scratch(std::initializer_list<int64_t> dims, size_t elem_size, const char* what) {
  const uint64_t limit = current_limits().max_tensor_bytes;
  uint64_t count = 1;
  bool empty = false;
  for (int64_t d : dims) {
    if (d <= 0) empty = true;
    else if (!empty && count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) count = 0;
    else if (!empty && count != 0) count *= static_cast<uint64_t>(d);
  }
  if (empty) return 0;
  if (count == 0 || count > limit / std::max<size_t>(elem_size, 1))
    fail(MRT_OUT_OF_MEMORY, what, " needs more than the limit of ", limit,
         " bytes per buffer (session.max_tensor_bytes / MOSAICRT_MAX_TENSOR_BYTES)");
  return static_cast<size_t>(count);
}

}  // namespace mrt
