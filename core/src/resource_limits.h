// Resource limits for untrusted models: what a model may declare or make the runtime allocate
// before it is refused with a clear error instead of exhausting memory or the stack.
//
// Each limit has a built-in default, a process-wide override from the environment, and a
// per-session override from a session config entry (MrtSessionOptionsSetConfigEntry):
//
//   limit                  default              environment                     config entry
//   max_tensor_bytes       physical memory      MOSAICRT_MAX_TENSOR_BYTES       session.max_tensor_bytes
//   max_nodes              1,000,000            MOSAICRT_MAX_NODES              session.max_nodes
//   max_graph_depth        32                   MOSAICRT_MAX_GRAPH_DEPTH        session.max_graph_depth
//   max_node_attributes    1,024                MOSAICRT_MAX_NODE_ATTRIBUTES    session.max_node_attributes
//
// max_tensor_bytes bounds every tensor the core allocates (initializers, constant folding, run
// outputs and intermediates) and the kernels' scratch buffers sized from shapes (checked_scratch);
// max_nodes counts the nodes of the main graph, of every nested subgraph and of every model-local
// function together; max_graph_depth is how deeply
// subgraphs (If/Loop/Scan bodies) may nest; max_node_attributes is per node.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>

namespace mrt {

struct Limits {
  uint64_t max_tensor_bytes;
  int64_t max_nodes;
  int32_t max_graph_depth;
  int64_t max_node_attributes;

  // Defaults with the environment's overrides (read once per process).
  static const Limits& process();
  // process() with the session config entries applied; a malformed value is INVALID_ARGUMENT.
  static Limits for_session(const std::map<std::string, std::string>& config);
};

// Tensors allocated on this thread while a scope is alive obey its limits (session creation and
// runs open one); elsewhere Limits::process() applies.
class LimitsScope {
 public:
  explicit LimitsScope(const Limits& limits);
  ~LimitsScope();
  LimitsScope(const LimitsScope&) = delete;
  LimitsScope& operator=(const LimitsScope&) = delete;

 private:
  const Limits* previous_;
};

const Limits& current_limits();

// The element count of a kernel's scratch buffer sized from shapes or attributes (the product of `dims`,
// each of `elem_size` bytes). Scratch obeys max_tensor_bytes like a tensor: OUT_OF_MEMORY naming `what`
// when the product overflows or the bytes exceed the limit, so a buffer the size of a huge output is
// refused before it is allocated.
size_t checked_scratch(std::initializer_list<int64_t> dims, size_t elem_size, const char* what);

}  // namespace mrt
