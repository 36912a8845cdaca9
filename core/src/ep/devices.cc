#include "ep/devices.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "cpu_isa.h"
#include "ep/dynlib.h"

#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <intrin.h>
#elif (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace mrt {

void HardwareDevice::seal() {
  keys_.clear();
  values_.clear();
  for (const auto& kv : metadata) {
    keys_.push_back(kv.first.c_str());
    values_.push_back(kv.second.c_str());
  }
  c.type = type;
  c.vendor_id = vendor_id;
  c.device_id = device_id;
  c.vendor = vendor.c_str();
  c.name = name.c_str();
  c.metadata_count = metadata.size();
  c.metadata_keys = keys_.data();
  c.metadata_values = values_.data();
}

namespace {

std::string trim(std::string s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// First "key : value" line of /proc/cpuinfo with this key ("" when absent).
std::string cpuinfo_field(const char* key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (in && std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return "";
}

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
#if defined(_MSC_VER)
  int v[4];
  __cpuidex(v, static_cast<int>(leaf), static_cast<int>(sub));
  for (int i = 0; i < 4; ++i) r[i] = static_cast<unsigned>(v[i]);
#else
  __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
#endif
}
#endif

void describe_cpu(HardwareDevice& d) {
  d.type = MRT_DEVICE_CPU;
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
  unsigned r[4];
  cpuid(0, 0, r);
  char vendor[13] = {0};
  std::memcpy(vendor, &r[1], 4);
  std::memcpy(vendor + 4, &r[3], 4);
  std::memcpy(vendor + 8, &r[2], 4);
  d.vendor = vendor;
  if (d.vendor == "GenuineIntel") d.vendor_id = 0x8086;
  if (d.vendor == "AuthenticAMD") d.vendor_id = 0x1022;
  cpuid(0x80000000u, 0, r);
  if (r[0] >= 0x80000004u) {
    char brand[49] = {0};
    for (unsigned i = 0; i < 3; ++i) {
      cpuid(0x80000002u + i, 0, r);
      std::memcpy(brand + 16 * i, r, 16);
    }
    d.name = trim(brand);
  }
  if (d.name.empty()) d.name = cpuinfo_field("model name");
#else
  d.name = cpuinfo_field("model name");
  std::string implementer = cpuinfo_field("CPU implementer");
  if (!implementer.empty()) {
    d.vendor_id = static_cast<uint32_t>(std::strtoul(implementer.c_str(), nullptr, 0));
    d.vendor = d.vendor_id == 0x41 ? "ARM" : d.vendor_id == 0x61 ? "Apple" : d.vendor_id == 0x51 ? "Qualcomm" : "";
  }
  std::string part = cpuinfo_field("CPU part");
  if (!part.empty()) d.device_id = static_cast<uint32_t>(std::strtoul(part.c_str(), nullptr, 0));
#endif
  if (d.name.empty()) d.name = std::string(this_machine()) + " CPU";
  if (d.vendor.empty()) d.vendor = "unknown";
  d.metadata.emplace_back("arch", this_machine());
  d.metadata.emplace_back("isa", cpu_isa().names());
  d.metadata.emplace_back("hardware_threads", std::to_string(std::thread::hardware_concurrency()));
}

// NVIDIA GPUs through the driver's NVML library, loaded only if present.
struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};

void discover_nvidia(std::vector<std::unique_ptr<HardwareDevice>>& out) {
  if (const char* off = std::getenv("MOSAICRT_DISABLE_GPU_DISCOVERY"); off && *off && std::strcmp(off, "0") != 0)
    return;
#if defined(_WIN32)
  const char* names[] = {"nvml.dll"};
#else
  const char* names[] = {"libnvidia-ml.so.1"};
#endif
  DynLib lib;
  for (const char* n : names) {
    try {
      lib.open(n);
      break;
    } catch (...) {
    }
  }
  if (!lib.is_open()) return;
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned*);
  using HandleFn = int (*)(unsigned, void**);
  using NameFn = int (*)(void*, char*, unsigned);
  using PciFn = int (*)(void*, NvmlPciInfo*);
  using MemFn = int (*)(void*, NvmlMemory*);
  auto init = reinterpret_cast<InitFn>(lib.symbol("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<InitFn>(lib.symbol("nvmlShutdown"));
  auto count = reinterpret_cast<CountFn>(lib.symbol("nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(lib.symbol("nvmlDeviceGetHandleByIndex_v2"));
  auto name = reinterpret_cast<NameFn>(lib.symbol("nvmlDeviceGetName"));
  auto pci = reinterpret_cast<PciFn>(lib.symbol("nvmlDeviceGetPciInfo_v3"));
  auto mem = reinterpret_cast<MemFn>(lib.symbol("nvmlDeviceGetMemoryInfo"));
  if (!init || !count || !handle || init() != 0) return;
  unsigned n = 0;
  if (count(&n) == 0) {
    for (unsigned i = 0; i < n; ++i) {
      void* h = nullptr;
      if (handle(i, &h) != 0) continue;
      auto d = std::make_unique<HardwareDevice>();
      d->type = MRT_DEVICE_GPU;
      d->vendor = "NVIDIA";
      d->vendor_id = 0x10de;
      char buf[96] = {0};
      if (name && name(h, buf, sizeof(buf)) == 0) d->name = buf;
      if (d->name.empty()) d->name = "NVIDIA GPU";
      NvmlPciInfo p{};
      if (pci && pci(h, &p) == 0) {
        d->device_id = p.pci_device_id >> 16;
        d->metadata.emplace_back("pci_bus_id", p.bus_id);
      }
      NvmlMemory m{};
      if (mem && mem(h, &m) == 0) d->metadata.emplace_back("memory_mb", std::to_string(m.total >> 20));
      d->metadata.emplace_back("cuda_device_ordinal", std::to_string(i));
      out.push_back(std::move(d));
    }
  }
  if (shutdown) shutdown();
}

}  // namespace

const std::vector<HardwareDevice*>& discovered_devices() {
  static const std::vector<HardwareDevice*>& devices = *[] {
    // Never destroyed: EPs of sessions still alive at exit hold pointers to these devices.
    static std::vector<std::unique_ptr<HardwareDevice>>& owned = *new std::vector<std::unique_ptr<HardwareDevice>>();
    owned.push_back(std::make_unique<HardwareDevice>());
    describe_cpu(*owned.back());
    discover_nvidia(owned);
    auto* v = new std::vector<HardwareDevice*>();
    for (auto& d : owned) {
      d->seal();
      v->push_back(d.get());
    }
    return v;
  }();
  return devices;
}

}  // namespace mrt
