// TfIdfVectorizer (opset 9) over int32/int64 token ids or strings: counts the pool's n-grams
// (lengths min_gram_length..max_gram_length, items up to max_skip_count apart) per row
// and weights the counts (TF: counts, IDF: weight where present, TFIDF: weight * count).
// A string pool (pool_strings) is numbered once; string tokens are matched by those numbers (a token
// outside the pool gets -1, which no n-gram holds).
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "norm_util.h"

namespace mrt {
namespace {

struct Tfidf {
  int mode = 1;  // 1 TF, 2 IDF, 3 TFIDF
  int64_t min_gram = 1, max_gram = 1, max_skip = 0, out_size = 0;
  std::vector<int64_t> indexes;
  std::vector<float> weights;
  std::set<std::vector<int64_t>> prefixes;
  std::map<std::vector<int64_t>, int64_t> ids;  // n-gram -> id (1-based)
  bool string_pool = false;
  std::unordered_map<std::string, int64_t> string_ids;  // pool_strings: string -> its token number
};

std::shared_ptr<Tfidf> parse_tfidf(const Node& n) {
  auto t = std::make_shared<Tfidf>();
  const std::string mode = n.attr_string("mode", "");
  t->mode = mode == "TF" ? 1 : mode == "IDF" ? 2 : mode == "TFIDF" ? 3 : 0;
  MRT_ENFORCE(t->mode != 0, MRT_INVALID_MODEL, n.label(), ": attribute mode is '", mode, "'; expected TF, IDF or TFIDF");
  t->min_gram = n.require_int("min_gram_length");
  t->max_gram = n.require_int("max_gram_length");
  t->max_skip = n.require_int("max_skip_count");
  MRT_ENFORCE(t->min_gram >= 1 && t->max_gram >= t->min_gram && t->max_skip >= 0, MRT_INVALID_MODEL, n.label(),
              ": need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got ", t->min_gram, ", ",
              t->max_gram, ", ", t->max_skip);
  const std::vector<int64_t> counts = n.require_ints("ngram_counts");
  t->indexes = n.require_ints("ngram_indexes");
  std::vector<int64_t> pool = n.attr_ints("pool_int64s");
  if (const Attribute* strings = n.attr("pool_strings")) {
    MRT_ENFORCE(pool.empty(), MRT_INVALID_MODEL, n.label(), ": give pool_int64s or pool_strings, not both");
    t->string_pool = true;
    for (const auto& word : strings->strings)
      pool.push_back(t->string_ids.emplace(word, static_cast<int64_t>(t->string_ids.size())).first->second);
  }
  t->weights = n.attr_floats("weights");
  MRT_ENFORCE(!t->indexes.empty(), MRT_INVALID_MODEL, n.label(), ": ngram_indexes is empty");
  for (int64_t ix : t->indexes)
    MRT_ENFORCE(ix >= 0, MRT_INVALID_MODEL, n.label(), ": ngram_indexes holds the negative index ", ix);
  t->out_size = *std::max_element(t->indexes.begin(), t->indexes.end()) + 1;
  MRT_ENFORCE(t->weights.empty() || static_cast<int64_t>(t->weights.size()) >= t->out_size, MRT_INVALID_MODEL,
              n.label(), ": weights has ", t->weights.size(), " entries for ", t->out_size, " output columns");
  int64_t id = 1;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t size = static_cast<int64_t>(i) + 1;
    const int64_t start = counts[i];
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
    MRT_ENFORCE(start >= 0 && end >= start && end <= static_cast<int64_t>(pool.size()), MRT_INVALID_MODEL, n.label(),
                ": ngram_counts ", shape_str(counts), " do not fit the pool of ", pool.size());
    const int64_t grams = (end - start) / size;
    if (size < t->min_gram || size > t->max_gram) {
      id += grams;
      continue;
    }
    for (int64_t g = 0; g < grams; ++g, ++id) {
      std::vector<int64_t> key(pool.begin() + start + g * size, pool.begin() + start + (g + 1) * size);
      for (size_t l = 1; l <= key.size(); ++l) t->prefixes.insert(std::vector<int64_t>(key.begin(), key.begin() + l));
      MRT_ENFORCE(id - 1 < static_cast<int64_t>(t->indexes.size()), MRT_INVALID_MODEL, n.label(),
                  ": ngram_indexes has fewer entries than the pool has n-grams");
      t->ids[key] = id;
    }
  }
  return t;
}

void tfidf_check(const Node& n, int64_t) { (void)parse_tfidf(n); }

void tfidf_kernel(OpContext& ctx) {
  auto t = ctx.node_cache<Tfidf>([&] { return parse_tfidf(ctx.node()); });
  const Tensor& X = ctx.input(0);
  MRT_CHECK_ARG(t->string_pool ? X.dtype() == DType::kString : (X.dtype() == DType::kInt32 || X.dtype() == DType::kInt64),
                "TfIdfVectorizer: input ", X.describe(), " must hold ", t->string_pool ? "strings (the pool is of strings)"
                : "int32 or int64 token ids");
  MRT_CHECK_ARG(X.rank() == 1 || X.rank() == 2, "TfIdfVectorizer: input must be 1-D or 2-D, got ", X.describe());
  const int64_t rows = X.rank() == 2 ? X.dim(0) : 1, L = X.rank() == 2 ? X.dim(1) : X.dim(0);
  // The output first: its allocation checks the size against the session's tensor limit before any scratch.
  Tensor& out = ctx.output(0, DType::kFloat, X.rank() == 2 ? Shape{rows, t->out_size} : Shape{t->out_size});
  std::vector<double> freq(static_cast<size_t>(out.numel()), 0.0);
  std::vector<int64_t> key;
  for (int64_t r = 0; r < rows; ++r) {
    auto at = [&](int64_t i) {
      if (!t->string_pool) return X.int_at(r * L + i);
      auto it = t->string_ids.find(string_at(X, r * L + i));
      return it == t->string_ids.end() ? int64_t(-1) : it->second;
    };
    int64_t start_n = t->min_gram;
    for (int64_t skip = 1; skip <= t->max_skip + 1; ++skip) {
      for (int64_t s = 0; s < L; ++s) {
        if (s + skip * (start_n - 1) >= L) break;
        key.clear();
        for (int64_t size = 1, item = s; size <= t->max_gram && item < L; ++size, item += skip) {
          key.push_back(at(item));
          if (!t->prefixes.count(key)) break;
          auto it = t->ids.find(key);
          if (size >= start_n && it != t->ids.end())
            freq[static_cast<size_t>(r * t->out_size + t->indexes[static_cast<size_t>(it->second - 1)])] += 1;
        }
      }
      if (start_n == 1) {
        ++start_n;
        if (start_n > t->max_gram) break;
      }
    }
  }
  std::vector<double> y(freq.size());
  for (size_t p = 0; p < freq.size(); ++p) {
    const size_t i = p % static_cast<size_t>(t->out_size);
    const bool w = !t->weights.empty();
    switch (t->mode) {
      case 1: y[p] = freq[p]; break;
      case 2: y[p] = freq[p] > 0 ? (w ? t->weights[i] : 1.0) : 0.0; break;
      default: y[p] = w ? t->weights[i] * freq[p] : freq[p]; break;
    }
  }
  norm::from_doubles(out, y);
}

}  // namespace

void register_tfidf_kernels(KernelRegistry& r) { r.add("TfIdfVectorizer", 9, tfidf_kernel, tfidf_check); }

}  // namespace mrt
