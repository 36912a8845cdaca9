// Session features kept out of the executor's file: caller overrides applied to the decoded
// model before it is optimized, and the Chrome-trace events of profiling.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph.h"
#include "tensor.h"

namespace mrt {

// add_initializer: the caller's tensors replace the model's initializers of those names (same
// element type); an unknown name is INVALID_ARGUMENT.
void replace_initializers(Graph& g, const std::vector<std::pair<std::string, Tensor>>& replacements);

// Free dimension overrides: "session.free_dimension_override_by_name.<dim_param>" and
// "session.free_dimension_override_by_denotation.<denotation>" config entries fix those dims of
// the graph's inputs, outputs and value_info.
void override_free_dims(Graph& g, const std::map<std::string, std::string>& config);

// Appends one Chrome-trace "X" event (times in µs) for an executed node to `out`.
void append_node_event(std::string& out, const Node& node, const std::string& provider, const std::string& tid,
                       double ts_us, double dur_us, const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor>& outputs);
// Appends the event of a whole run.
void append_run_event(std::string& out, const std::string& tid, double ts_us, double dur_us);

}  // namespace mrt
