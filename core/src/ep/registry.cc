#include "ep/registry.h"

#include <algorithm>
#include <set>

#include "error.h"

namespace mrt {

namespace {

const char* kCpuEp = MRT_CPU_EP_NAME;

std::string abi_str(uint32_t v) { return std::to_string(v >> 16) + "." + std::to_string(v & 0xFFFF); }

bool abi_compatible(uint32_t plugin) {
  return (plugin >> 16) == MRT_EP_ABI_VERSION_MAJOR && (plugin & 0xFFFF) <= MRT_EP_ABI_VERSION_MINOR;
}

[[noreturn]] void abi_refusal(const std::string& path, const std::string& what, uint32_t plugin) {
  bool future = (plugin >> 16) > MRT_EP_ABI_VERSION_MAJOR ||
                ((plugin >> 16) == MRT_EP_ABI_VERSION_MAJOR && (plugin & 0xFFFF) > MRT_EP_ABI_VERSION_MINOR);
  fail(MRT_EP_ERROR, "EP library '", path, "': ", what, " was built for mosaicrt EP ABI ", abi_str(plugin),
       ", but this mosaicrt (", MOSAICRT_VERSION_STRING, ") provides EP ABI ", abi_str(MRT_EP_ABI_VERSION), "; ",
       future ? "upgrade mosaicrt or install an older EP wheel" : "install an EP wheel built for this mosaicrt");
}

// Takes ownership of a plugin-made status and throws it as an Error with `prefix`.
void throw_status(MrtStatus* st, const std::string& prefix) {
  MrtErrorCode code = MRT_EP_ERROR;
  std::string msg = take_status_message(st, &code);
  if (!msg.empty()) throw Error(code == MRT_OK ? MRT_EP_ERROR : code, prefix + msg);
}

const std::vector<int>& type_order(int policy) {
  static const std::vector<int> cpu{MRT_DEVICE_CPU};
  static const std::vector<int> npu{MRT_DEVICE_NPU, MRT_DEVICE_CPU};
  static const std::vector<int> gpu{MRT_DEVICE_GPU, MRT_DEVICE_CPU};
  static const std::vector<int> perf{MRT_DEVICE_GPU, MRT_DEVICE_NPU, MRT_DEVICE_CPU};
  switch (policy) {
    case MRT_EP_POLICY_PREFER_NPU:
    case MRT_EP_POLICY_MAX_EFFICIENCY:
    case MRT_EP_POLICY_MIN_OVERALL_POWER:
      return npu;
    case MRT_EP_POLICY_PREFER_GPU:
      return gpu;
    case MRT_EP_POLICY_MAX_PERFORMANCE:
      return perf;
    default:
      return cpu;
  }
}

}  // namespace

std::string take_status_message(MrtStatus* st, MrtErrorCode* code) {
  if (!st) return "";
  if (code) *code = MrtStatusGetCode(st);
  std::string msg = MrtStatusGetMessage(st);
  MrtReleaseStatus(st);
  return msg.empty() ? "(no message)" : msg;
}

std::string EpChoice::name() const { return factory ? factory->name : kCpuEp; }

EpLibrary::~EpLibrary() {
  if (release_factory)
    for (auto& f : factories)
      if (f->api) release_factory(f->api);
  factories.clear();
}

EpRegistry& EpRegistry::instance() {
  static EpRegistry* r = new EpRegistry();  // never destroyed: plugins may outlive static teardown
  return *r;
}

void EpRegistry::register_library(const std::string& name, const std::string& path) {
  if (name.empty()) fail(MRT_INVALID_ARGUMENT, "an EP registration name must not be empty");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& l : libraries_)
    if (l->registration_name == name)
      fail(MRT_EP_ERROR, "an EP library is already registered as '", name, "' (", l->path,
           "); unregister it first or pick another name");
  auto lib = std::make_shared<EpLibrary>();
  lib->registration_name = name;
  lib->path = path;
  lib->lib.open(path);
  auto get_abi = reinterpret_cast<MrtEpGetAbiVersionFn>(lib->lib.symbol("MrtEpGetAbiVersion"));
  auto create = reinterpret_cast<MrtEpCreateFactoriesFn>(lib->lib.symbol("MrtEpCreateFactories"));
  auto release = reinterpret_cast<MrtEpReleaseFactoryFn>(lib->lib.symbol("MrtEpReleaseFactory"));
  const char* missing = !get_abi ? "MrtEpGetAbiVersion" : !create ? "MrtEpCreateFactories"
                                                        : !release ? "MrtEpReleaseFactory" : nullptr;
  if (missing)
    fail(MRT_EP_ERROR, "'", path, "' is not a mosaicrt EP library: it does not export ", missing,
         " (an EP library exports MrtEpGetAbiVersion, MrtEpCreateFactories and MrtEpReleaseFactory)");
  uint32_t abi = get_abi();
  if (!abi_compatible(abi)) abi_refusal(path, "the library", abi);

  constexpr size_t kMaxFactories = 32;
  MrtEpFactory* made[kMaxFactories] = {nullptr};
  size_t count = 0;
  MrtStatus* st = create(&ep_host_api(), name.c_str(), made, kMaxFactories, &count);
  lib->release_factory = release;
  if (st) throw_status(st, "EP library '" + path + "' failed to create its factories: ");
  if (count > kMaxFactories) fail(MRT_EP_ERROR, "EP library '", path, "' reported ", count, " factories (max 32)");
  for (size_t i = 0; i < count; ++i) {
    auto f = std::make_unique<EpFactory>();
    f->library = lib.get();
    f->api = made[i];
    lib->factories.push_back(std::move(f));  // owned now: released with the library on any error below
  }
  if (count == 0) fail(MRT_EP_ERROR, "EP library '", path, "' provides no EP factory");

  std::set<std::string> taken{kCpuEp};
  for (const auto& l : libraries_)
    for (const auto& f : l->factories) taken.insert(f->name);
  for (auto& f : lib->factories) {
    MrtEpFactory* api = f->api;
    if (!api) fail(MRT_EP_ERROR, "EP library '", path, "' returned a NULL factory");
    if (!abi_compatible(api->abi_version)) abi_refusal(path, "its factory", api->abi_version);
    if (!api->GetName || !api->GetSupportedDevices || !api->CreateEp || !api->ReleaseEp)
      fail(MRT_EP_ERROR, "EP library '", path, "': a factory lacks a required function (GetName, GetSupportedDevices, "
           "CreateEp, ReleaseEp)");
    const char* n = api->GetName(api);
    f->name = n ? n : "";
    if (f->name.empty()) fail(MRT_EP_ERROR, "EP library '", path, "': a factory has no name");
    if (!taken.insert(f->name).second)
      fail(MRT_EP_ERROR, "EP library '", path, "': execution provider '", f->name, "' is already provided by another ",
           "registered library");
    const char* v = api->GetVendor ? api->GetVendor(api) : nullptr;
    const char* ver = api->GetVersion ? api->GetVersion(api) : nullptr;
    f->vendor = v ? v : "";
    f->version = ver ? ver : "";

    std::vector<const MrtHardwareDevice*> candidates;
    for (const HardwareDevice* d : discovered_devices()) candidates.push_back(&d->c);
    if (api->GetOwnDevices) {
      const MrtHardwareDevice* own = nullptr;
      size_t n_own = api->GetOwnDevices(api, &own);
      for (size_t i = 0; own && i < n_own; ++i) candidates.push_back(&own[i]);
    }
    std::vector<uint8_t> supported(candidates.size(), 0);
    throw_status(api->GetSupportedDevices(api, candidates.data(), candidates.size(), supported.data()),
                 "EP library '" + path + "': " + f->name + " failed to report its devices: ");
    for (size_t i = 0; i < candidates.size(); ++i)
      if (supported[i]) {
        f->devices.push_back(candidates[i]);
        f->device_ids.push_back(next_device_id_++);
      }
  }
  libraries_.push_back(std::move(lib));
}

void EpRegistry::unregister_library(const std::string& name) {
  std::shared_ptr<EpLibrary> victim;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(libraries_.begin(), libraries_.end(),
                           [&](const std::shared_ptr<EpLibrary>& l) { return l->registration_name == name; });
    if (it == libraries_.end()) {
      std::string known;
      for (const auto& l : libraries_) known += (known.empty() ? "'" : ", '") + l->registration_name + "'";
      fail(MRT_EP_ERROR, "no EP library is registered as '", name, "' (registered: ", known.empty() ? "none" : known,
           ")");
    }
    long users = it->use_count() - 1;
    if (users > 0)
      fail(MRT_EP_ERROR, "EP library '", name, "' (", (*it)->path, ") is in use by ", users,
           " live session(s); release them before unregistering");
    victim = std::move(*it);
    libraries_.erase(it);
  }
  victim.reset();  // releases factories and closes the library outside the lock
}

std::vector<EpDevice> EpRegistry::ep_devices_locked() const {
  std::vector<EpDevice> out;
  for (const auto& l : libraries_)
    for (const auto& f : l->factories)
      for (size_t i = 0; i < f->devices.size(); ++i) {
        EpDevice d;
        d.id = f->device_ids[i];
        d.factory = f.get();
        d.device = f->devices[i];
        d.ep_name = f->name.c_str();
        d.ep_vendor = f->vendor.c_str();
        d.ep_version = f->version.c_str();
        d.library_path = l->path.c_str();
        out.push_back(d);
      }
  EpDevice cpu;
  cpu.id = 1;
  cpu.device = &discovered_devices().front()->c;
  cpu.ep_name = kCpuEp;
  cpu.ep_vendor = "mosaicrt";
  cpu.ep_version = MOSAICRT_VERSION_STRING;
  out.push_back(cpu);
  return out;
}

std::vector<EpDevice> EpRegistry::ep_devices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ep_devices_locked();
}

std::vector<std::string> EpRegistry::provider_names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& l : libraries_)
    for (const auto& f : l->factories) out.push_back(f->name);
  out.push_back(kCpuEp);
  return out;
}

MrtEpDeviceInfo device_info(const EpDevice& d) {
  MrtEpDeviceInfo i{};
  i.id = d.id;
  i.ep_name = d.ep_name;
  i.ep_vendor = d.ep_vendor;
  i.ep_version = d.ep_version;
  i.library_path = d.library_path;
  i.device_type = d.device->type;
  i.vendor_id = d.device->vendor_id;
  i.device_id = d.device->device_id;
  i.device_vendor = d.device->vendor ? d.device->vendor : "";
  i.device_name = d.device->name ? d.device->name : "";
  i.metadata_count = d.device->metadata_count;
  i.metadata_keys = d.device->metadata_keys;
  i.metadata_values = d.device->metadata_values;
  return i;
}

std::vector<EpChoice> EpRegistry::select(const ProviderSelection& sel) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<EpDevice> all = ep_devices_locked();
  auto library_of = [&](const EpFactory* f) -> std::shared_ptr<EpLibrary> {
    for (const auto& l : libraries_)
      if (l.get() == f->library) return l;
    return nullptr;
  };
  std::vector<EpChoice> out;
  auto choice_for = [&](const EpFactory* f) -> EpChoice& {
    for (auto& c : out)
      if (c.factory == f) return c;
    EpChoice c;
    c.factory = f;
    if (f) c.library = library_of(f);
    out.push_back(std::move(c));
    return out.back();
  };
  auto add_device = [&](const EpDevice& d) {
    EpChoice& c = choice_for(d.factory);
    if (d.factory && std::find(c.devices.begin(), c.devices.end(), d.device) == c.devices.end())
      c.devices.push_back(d.device);
  };
  auto available = [&] {
    std::string s;
    for (const auto& l : libraries_)
      for (const auto& f : l->factories) s += f->name + ", ";
    return s + kCpuEp;
  };

  if (!sel.explicit_providers.empty()) {
    for (const auto& req : sel.explicit_providers) {
      if (!req.device_ids.empty()) {
        const EpFactory* owner = nullptr;
        bool first = true;
        for (uint64_t id : req.device_ids) {
          auto it = std::find_if(all.begin(), all.end(), [&](const EpDevice& d) { return d.id == id; });
          if (it == all.end())
            fail(MRT_EP_ERROR, "EP device ", id, " is no longer available (its EP library was unregistered?)");
          if (!first && it->factory != owner)
            fail(MRT_INVALID_ARGUMENT, "add_provider_for_devices: all devices must belong to one EP (got ",
                 owner ? owner->name : kCpuEp, " and ", it->ep_name, ")");
          owner = it->factory;
          first = false;
          add_device(*it);
        }
        choice_for(owner).options = req.options;
        continue;
      }
      if (req.ep_name == kCpuEp) {
        choice_for(nullptr).options = req.options;
        continue;
      }
      const EpFactory* found = nullptr;
      for (const auto& l : libraries_)
        for (const auto& f : l->factories)
          if (f->name == req.ep_name) found = f.get();
      if (!found)
        fail(MRT_EP_ERROR, "execution provider '", req.ep_name, "' is not available (available: ", available(),
             "); install its wheel or call register_execution_provider_library");
      if (found->devices.empty())
        fail(MRT_EP_ERROR, "execution provider '", found->name, "' (", found->library->path,
             ") supports none of this machine's devices");
      EpChoice& c = choice_for(found);
      c.devices = found->devices;
      c.options = req.options;
    }
  } else if (sel.delegate) {
    std::vector<MrtEpDeviceInfo> infos;
    for (const auto& d : all) infos.push_back(device_info(d));
    std::vector<size_t> picked(infos.size(), 0);
    size_t n = 0;
    throw_status(sel.delegate(infos.data(), infos.size(), picked.data(), picked.size(), &n, sel.delegate_state),
                 "the EP selection delegate failed: ");
    if (n == 0) fail(MRT_EP_ERROR, "the EP selection delegate selected no EP device");
    if (n > picked.size()) fail(MRT_EP_ERROR, "the EP selection delegate reported ", n, " selections for ", picked.size(), " devices");
    for (size_t k = 0; k < n; ++k) {
      if (picked[k] >= all.size())
        fail(MRT_EP_ERROR, "the EP selection delegate selected index ", picked[k], " of ", all.size(), " devices");
      add_device(all[picked[k]]);
    }
  } else if (sel.policy >= 0) {
    for (int type : type_order(sel.policy)) {
      for (const auto& d : all)
        if (d.factory && d.device->type == type) add_device(d);
      if (!out.empty() || type == MRT_DEVICE_CPU) break;
    }
  }
  if (std::none_of(out.begin(), out.end(), [](const EpChoice& c) { return c.factory == nullptr; }))
    choice_for(nullptr);
  return out;
}

}  // namespace mrt
