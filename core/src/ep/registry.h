// Plugin EP libraries, their factories and the (EP, device) pairs they offer; and the
// choice of EPs for a session (explicit list, policy or delegate).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ep/devices.h"
#include "ep/dynlib.h"
#include "mosaicrt/ep.h"

namespace mrt {

struct EpLibrary;

struct EpFactory {
  EpLibrary* library = nullptr;
  MrtEpFactory* api = nullptr;
  std::string name, vendor, version;
  std::vector<const MrtHardwareDevice*> devices;  // supported ones, discovered first then own
  std::vector<uint64_t> device_ids;               // the ep-device id of each
};

struct EpLibrary {
  std::string registration_name, path;
  DynLib lib;
  MrtEpReleaseFactoryFn release_factory = nullptr;
  std::vector<std::unique_ptr<EpFactory>> factories;
  ~EpLibrary();
};

// One (EP, device) pair. factory == nullptr is the built-in CPU EP. Valid while the
// factory's library stays registered.
struct EpDevice {
  uint64_t id = 0;
  const EpFactory* factory = nullptr;
  const MrtHardwareDevice* device = nullptr;
  const char* ep_name = "";
  const char* ep_vendor = "";
  const char* ep_version = "";
  const char* library_path = "";
};

// What session options ask for (filled by the C API).
struct ProviderRequest {
  std::string ep_name;                // by name ...
  std::vector<uint64_t> device_ids;   // ... or by ep-device ids
  std::vector<std::pair<std::string, std::string>> options;
};
struct ProviderSelection {
  std::vector<ProviderRequest> explicit_providers;
  int policy = -1;  // MrtEpSelectionPolicy, -1 = none
  MrtEpSelectionDelegate delegate = nullptr;
  void* delegate_state = nullptr;
};

// An EP chosen for a session: the factory (nullptr = CPU EP), devices and options.
struct EpChoice {
  const EpFactory* factory = nullptr;
  std::shared_ptr<EpLibrary> library;
  std::vector<const MrtHardwareDevice*> devices;
  std::vector<std::pair<std::string, std::string>> options;
  std::string name() const;
};

class EpRegistry {
 public:
  static EpRegistry& instance();

  void register_library(const std::string& name, const std::string& path);
  void unregister_library(const std::string& name);
  // Snapshot of every (EP, device) pair: plugin EPs in registration order, the CPU EP last.
  std::vector<EpDevice> ep_devices() const;
  std::vector<std::string> provider_names() const;  // plugin EPs, then the CPU EP
  // The ordered EP list for a session; the CPU EP is always last.
  std::vector<EpChoice> select(const ProviderSelection& sel) const;

 private:
  EpRegistry() = default;
  std::vector<EpDevice> ep_devices_locked() const;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<EpLibrary>> libraries_;
  uint64_t next_device_id_ = 2;  // 1 is the CPU EP on the CPU
};

// Reads and releases a status a plugin or delegate returned: "" for success (NULL), else its
// message; *code receives its code.
std::string take_status_message(MrtStatus* st, MrtErrorCode* code = nullptr);

// An MrtEpDeviceInfo pointing into `d` (valid as long as `d` is).
MrtEpDeviceInfo device_info(const EpDevice& d);

const MrtEpApi& ep_host_api();

}  // namespace mrt
