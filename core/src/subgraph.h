// Subgraphs of control-flow nodes (If, Loop, Scan). The session compiles every graph
// attribute of a node into a child Session at creation (so unsupported operators inside
// a branch or body are refused up front) and hands them to the node's kernel through its
// per-node cache. A subgraph reads values of enclosing graphs by name ("outer scope");
// the session passes those values to the node as extra inputs after its own, in the
// order outer_scope_names gives, so they stay alive until the node has run. Bodies run
// on the calling thread (their sessions have a pool of one) and have their own allocator.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph.h"

namespace mrt {

class Session;

// Names that the graph attributes of `n` (and subgraphs nested in them) read but do not
// define, sorted.
std::vector<std::string> outer_scope_names(const Node& n);

struct CompiledSubgraphs {
  std::map<std::string, std::shared_ptr<Session>> by_attr;  // graph attribute name -> compiled body
  std::vector<std::string> outer;                           // outer_scope_names(node)
};

}  // namespace mrt
