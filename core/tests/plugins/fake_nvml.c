/* A test-only stand-in for the NVIDIA driver's libnvidia-ml.so.1: two simulated GPUs, so
 * the core's GPU discovery can be tested on machines without a GPU. Loaded through
 * LD_LIBRARY_PATH by tests/wheel/test_plugin_eps.py. */
#include <stdio.h>
#include <string.h>

typedef struct {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
} PciInfo;
typedef struct {
  unsigned long long total, free, used;
} Memory;

static int g_handles[2];

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** h) {
  if (i >= 2) return 2;
  *h = &g_handles[i];
  return 0;
}
int nvmlDeviceGetName(void* h, char* buf, unsigned len) {
  snprintf(buf, len, "NVIDIA Simulated GPU %d", (int)((int*)h - g_handles));
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void* h, PciInfo* p) {
  memset(p, 0, sizeof(*p));
  p->pci_device_id = (0x2330u << 16) | 0x10deu;
  snprintf(p->bus_id, sizeof(p->bus_id), "00000000:%02x:00.0", (int)((int*)h - g_handles) + 0x41);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* h, Memory* m) {
  (void)h;
  m->total = 80ull << 30;
  m->free = m->total;
  m->used = 0;
  return 0;
}
