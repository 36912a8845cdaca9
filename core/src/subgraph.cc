#include "subgraph.h"

#include <set>

namespace mrt {
namespace {

// Adds to `out` the names `g` reads without defining them (graph inputs, initializers and
// node outputs define names; nested subgraphs are searched too).
void free_names(const Graph& g, std::set<std::string>& out) {
  std::set<std::string> defined;
  for (const auto& v : g.inputs) defined.insert(v.name);
  for (const auto& kv : g.initializers) defined.insert(kv.first);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) defined.insert(o);
  std::set<std::string> used;
  for (const auto& n : g.nodes) {
    for (const auto& i : n.inputs)
      if (!i.empty()) used.insert(i);
    for (const auto& a : n.attributes) {
      if (a.g) free_names(*a.g, used);
      for (const auto& sg : a.graphs) free_names(*sg, used);
    }
  }
  for (const auto& o : g.outputs) used.insert(o.name);
  for (const auto& u : used)
    if (!defined.count(u)) out.insert(u);
}

}  // namespace

std::vector<std::string> outer_scope_names(const Node& n) {
  std::set<std::string> names;
  for (const auto& a : n.attributes) {
    if (a.g) free_names(*a.g, names);
    for (const auto& sg : a.graphs) free_names(*sg, names);
  }
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace mrt
