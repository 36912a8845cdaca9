// Hardware devices the core can see by itself: the CPU (vendor, model, ISA features) and
// NVIDIA GPUs when the driver's management library is present. Discovery never warns:
// a missing sysfs entry or driver just means fewer devices.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "mosaicrt/ep.h"

namespace mrt {

// A device with owned strings; `c` points into them (stable once the object is in place).
struct HardwareDevice {
  MrtDeviceType type = MRT_DEVICE_CPU;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  std::string vendor;
  std::string name;
  std::vector<std::pair<std::string, std::string>> metadata;

  MrtHardwareDevice c{};
  std::vector<const char*> keys_, values_;
  void seal();  // fill `c` from the fields; call after the object stops moving
};

// Discovered once per process, in a stable order (CPU first). Never empty.
const std::vector<HardwareDevice*>& discovered_devices();

}  // namespace mrt
