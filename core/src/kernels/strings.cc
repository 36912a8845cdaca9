// String operators: StringNormalizer, StringConcat, StringSplit, RegexFullMatch, Equal on strings (called
// by the Equal kernel), and the ai.onnx.ml mappings LabelEncoder (opsets 1-4) and CategoryMapper.
// Strings are UTF-8 bytes. Elements are read with string_at and written with set_string (tensor.h), on
// the calling thread.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <regex>
#include <type_traits>
#include <unordered_map>

#include "../kernel.h"
#include "../resource_limits.h"
#include "strings.h"

namespace mrt {
namespace {

void require_strings(const Tensor& t, const char* what) {
  MRT_CHECK_ARG(t.dtype() == DType::kString, what, " must be a string tensor, got ", t.describe());
}

// Element offsets of `a` and `b` for every element of their broadcast shape, in order.
template <class Fn>
void for_each_broadcast(const Tensor& a, const Tensor& b, const Shape& out, Fn fn) {
  const size_t rank = out.size();
  std::vector<int64_t> sa(rank, 0), sb(rank, 0);
  auto strides = [&](const Tensor& t, std::vector<int64_t>& s) {
    int64_t step = 1;
    for (size_t k = 0; k < t.rank(); ++k) {
      const size_t d = t.rank() - 1 - k, o = rank - 1 - k;
      s[o] = t.dim(d) == 1 ? 0 : step;
      step *= t.dim(d);
    }
  };
  strides(a, sa);
  strides(b, sb);
  const int64_t n = shape_size(out);
  std::vector<int64_t> idx(rank, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, ia, ib);
    for (size_t d = rank; d-- > 0;) {
      ++idx[d];
      ia += sa[d];
      ib += sb[d];
      if (idx[d] < out[d]) break;
      ia -= sa[d] * out[d];
      ib -= sb[d] * out[d];
      idx[d] = 0;
    }
  }
}

// ---- case mapping ------------------------------------------------------------------------------
// ASCII, Latin-1, Latin Extended-A (pairs), Greek and Cyrillic; other code points are left unchanged.

uint32_t to_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    const bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_lower ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

uint32_t to_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    const bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_lower ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

void put_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {  // the mapped ranges stay below 0x10000
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// Maps every code point of UTF-8 `s` through `f`; invalid bytes are copied unchanged.
template <class F>
std::string map_code_points(const std::string& s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool valid = len != 0 && i + len <= s.size();
    uint32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; valid && k < len; ++k) {
      const unsigned char cont = static_cast<unsigned char>(s[i + k]);
      valid = (cont >> 6) == 2;
      c = (c << 6) | (cont & 0x3F);
    }
    if (!valid) {
      out.push_back(s[i++]);
      continue;
    }
    const uint32_t m = f(c);
    if (m == c) out.append(s, i, len);
    else put_utf8(out, m);
    i += len;
  }
  return out;
}

std::string upper(const std::string& s) { return map_code_points(s, to_upper); }
std::string lower(const std::string& s) { return map_code_points(s, to_lower); }

// ---- StringNormalizer ----------------------------------------------------------------------------

struct NormalizerSpec {
  enum class Case { kNone, kLower, kUpper } change = Case::kNone;
  bool case_sensitive = false;
  std::vector<std::string> stopwords;  // lower-cased when !case_sensitive
};

NormalizerSpec normalizer_spec(const Node& n) {
  NormalizerSpec s;
  const std::string action = n.attr_string("case_change_action", "NONE");
  if (action == "LOWER") s.change = NormalizerSpec::Case::kLower;
  else if (action == "UPPER") s.change = NormalizerSpec::Case::kUpper;
  else MRT_ENFORCE(action == "NONE", MRT_INVALID_MODEL, n.label(), ": case_change_action is '", action,
                   "'; expected LOWER, UPPER or NONE");
  s.case_sensitive = n.attr_int("is_case_sensitive", 0) != 0;
  if (const Attribute* a = n.attr("stopwords")) {
    MRT_ENFORCE(a->type == AttrType::kStrings, MRT_INVALID_MODEL, n.label(), ": stopwords must be a list of strings");
    for (const auto& w : a->strings) s.stopwords.push_back(s.case_sensitive ? w : lower(w));
  }
  return s;
}

void string_normalizer_check(const Node& n, int64_t) { (void)normalizer_spec(n); }

void string_normalizer_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_strings(x, "StringNormalizer input");
  MRT_CHECK_ARG(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1), "StringNormalizer takes [C] or [1, C], got ",
                x.describe());
  auto spec = ctx.node_cache<NormalizerSpec>([&] { return std::make_shared<NormalizerSpec>(normalizer_spec(ctx.node())); });
  std::vector<std::string> kept;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string& s = string_at(x, i);
    const std::string key = spec->case_sensitive ? s : lower(s);
    if (std::find(spec->stopwords.begin(), spec->stopwords.end(), key) != spec->stopwords.end()) continue;
    kept.push_back(spec->change == NormalizerSpec::Case::kLower   ? lower(s)
                   : spec->change == NormalizerSpec::Case::kUpper ? upper(s)
                                                                  : s);
  }
  if (kept.empty()) kept.emplace_back();  // everything removed: one empty string, as the operator defines
  const int64_t c = static_cast<int64_t>(kept.size());
  Tensor& y = ctx.output(0, DType::kString, x.rank() == 1 ? Shape{c} : Shape{1, c});
  for (int64_t i = 0; i < c; ++i) set_string(y, i, std::move(kept[static_cast<size_t>(i)]));
}

// ---- StringConcat ------------------------------------------------------------------------------

void string_concat_kernel(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_strings(a, "StringConcat input X");
  require_strings(b, "StringConcat input Y");
  const Shape out = broadcast_shapes(a.shape(), b.shape());
  // The new strings' bytes obey max_tensor_bytes like a tensor's (a broadcast repeats long strings).
  uint64_t total = 0;
  const uint64_t limit = current_limits().max_tensor_bytes;
  for_each_broadcast(a, b, out, [&](int64_t, int64_t ia, int64_t ib) {
    total += string_at(a, ia).size() + string_at(b, ib).size();
    if (total > limit)
      fail(MRT_OUT_OF_MEMORY, "StringConcat: the output's strings need more than ", limit,
           " bytes, over the limit per tensor (session.max_tensor_bytes / MOSAICRT_MAX_TENSOR_BYTES)");
  });
  Tensor& y = ctx.output(0, DType::kString, out);
  for_each_broadcast(a, b, out, [&](int64_t i, int64_t ia, int64_t ib) {
    set_string(y, i, string_at(a, ia) + string_at(b, ib));
  });
}

// ---- StringSplit -------------------------------------------------------------------------------

// Python's str.split(delimiter, maxsplit): an empty delimiter splits at runs of whitespace and drops
// leading and trailing whitespace; maxsplit < 0 means no limit.
std::vector<std::string> split_one(const std::string& s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (!delim.empty()) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t at = s.find(delim, start);
      if (at == std::string::npos) break;
      parts.push_back(s.substr(start, at - start));
      start = at + delim.size();
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  size_t i = 0;
  while (true) {
    while (i < s.size() && space(s[i])) ++i;
    if (i == s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(s.substr(i));  // the rest, trailing whitespace included
      break;
    }
    size_t j = i;
    while (j < s.size() && !space(s[j])) ++j;
    parts.push_back(s.substr(i, j - i));
    i = j;
  }
  return parts;
}

void string_split_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_strings(x, "StringSplit input");
  const std::string delim = ctx.node().attr_string("delimiter", "");
  const int64_t maxsplit = ctx.node().attr_int("maxsplit", -1);
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(x.numel()));
  int64_t widest = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    parts[static_cast<size_t>(i)] = split_one(string_at(x, i), delim, maxsplit);
    widest = std::max<int64_t>(widest, static_cast<int64_t>(parts[static_cast<size_t>(i)].size()));
  }
  Shape yshape = x.shape();
  yshape.push_back(widest);
  Tensor& y = ctx.output(0, DType::kString, yshape);  // positions past an element's parts stay ""
  Tensor* z = ctx.has_output(1) ? &ctx.output(1, DType::kInt64, x.shape()) : nullptr;
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto& p = parts[static_cast<size_t>(i)];
    for (size_t k = 0; k < p.size(); ++k) set_string(y, i * widest + static_cast<int64_t>(k), std::move(p[k]));
    if (z) z->data<int64_t>()[i] = static_cast<int64_t>(p.size());
  }
}

// ---- RegexFullMatch ----------------------------------------------------------------------------

// The matcher (std::regex, ECMAScript grammar: RE2's syntax for the common constructs) backtracks
// recursively, so the pattern's size and nesting and the length of a matched string are bounded: beyond
// them a deep recursion could exhaust the stack.
constexpr size_t kMaxPatternBytes = 1024;
constexpr int kMaxPatternNesting = 16;
constexpr size_t kMaxMatchedBytes = 4096;
constexpr uint64_t kMaxRepeat = 1000;
constexpr uint64_t kMaxUnrolled = 1u << 20;

std::shared_ptr<std::regex> compile_pattern(const Node& n) {
  const Attribute* a = n.attr("pattern");
  MRT_ENFORCE(a && a->type == AttrType::kString, MRT_INVALID_MODEL, n.label(), ": the string attribute pattern is required");
  MRT_ENFORCE(a->s.size() <= kMaxPatternBytes, MRT_NOT_IMPLEMENTED, n.label(), ": pattern of ", a->s.size(),
              " bytes is longer than the ", kMaxPatternBytes, " supported");
  int depth = 0, deepest = 0;
  for (size_t i = 0; i < a->s.size(); ++i) {
    if (a->s[i] == '\\') ++i;
    else if (a->s[i] == '(') deepest = std::max(deepest, ++depth);
    else if (a->s[i] == ')') --depth;
  }
  MRT_ENFORCE(deepest <= kMaxPatternNesting, MRT_NOT_IMPLEMENTED, n.label(), ": pattern nests groups ", deepest,
              " deep, more than the ", kMaxPatternNesting, " supported");
  // Counted repetitions are unrolled by the matcher: a{100000} makes 100000 states, and nested counts
  // multiply. The product of all counts times the pattern's length is bounded.
  uint64_t product = 1;
  for (size_t i = 0; i < a->s.size(); ++i) {
    if (a->s[i] == '\\') {
      ++i;
      continue;
    }
    if (a->s[i] != '{') continue;
    uint64_t count = 0, largest = 1;
    for (size_t k = i + 1; k < a->s.size() && (std::isdigit(static_cast<unsigned char>(a->s[k])) || a->s[k] == ','); ++k) {
      count = a->s[k] == ',' ? 0 : std::min<uint64_t>(count * 10 + static_cast<uint64_t>(a->s[k] - '0'), 1u << 20);
      MRT_ENFORCE(count <= kMaxRepeat, MRT_NOT_IMPLEMENTED, n.label(), ": pattern repeats ", count,
                  " times; counts up to ", kMaxRepeat, " are supported");
      largest = std::max(largest, count);
    }
    product = std::min<uint64_t>(product * largest, uint64_t(1) << 40);
  }
  MRT_ENFORCE(product * a->s.size() <= kMaxUnrolled, MRT_NOT_IMPLEMENTED, n.label(),
              ": pattern's repetition counts multiply to ", product, ", too many states to match");
  try {
    return std::make_shared<std::regex>(a->s, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    fail(MRT_INVALID_MODEL, n.label(), ": pattern '", a->s, "' is not a valid regular expression: ", e.what());
  }
}

void regex_full_match_check(const Node& n, int64_t) { (void)compile_pattern(n); }

void regex_full_match_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_strings(x, "RegexFullMatch input");
  auto re = ctx.node_cache<std::regex>([&] { return compile_pattern(ctx.node()); });
  Tensor& y = ctx.output(0, DType::kBool, x.shape());
  bool* out = y.data<bool>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string& v = string_at(x, i);
    MRT_CHECK_IMPL(v.size() <= kMaxMatchedBytes, "RegexFullMatch: element ", i, " has ", v.size(),
                   " bytes; strings up to ", kMaxMatchedBytes, " bytes are matched");
    out[i] = std::regex_match(v, *re);
  }
}

// ---- LabelEncoder (ai.onnx.ml) -------------------------------------------------------------------
// Keys and values come from keys_{strings,int64s,floats} / values_{...} or, from opset 4, keys_tensor /
// values_tensor; the default from default_{string,int64,float} or default_tensor. Opset 1 maps between
// strings and their index in classes_strings.

struct Scalar {  // one key or value: a string, an integer or a floating-point number
  DType type = DType::kUndefined;
  std::string s;
  int64_t i = 0;
  double f = 0;
};

struct ScalarHash {
  size_t operator()(const Scalar& v) const {
    if (v.type == DType::kString) return std::hash<std::string>()(v.s);
    if (dtype_is_float(v.type)) return v.f != v.f ? 0x7ff8 : std::hash<double>()(v.f == 0 ? 0.0 : v.f);
    return std::hash<int64_t>()(v.i);
  }
};
struct ScalarEq {
  bool operator()(const Scalar& a, const Scalar& b) const {
    if (a.type == DType::kString) return a.s == b.s;
    if (dtype_is_float(a.type)) return a.f == b.f || (a.f != a.f && b.f != b.f);  // NaN keys match NaN
    return a.i == b.i;
  }
};

struct Encoder {
  DType key_type = DType::kUndefined, value_type = DType::kUndefined;
  std::unordered_map<Scalar, Scalar, ScalarHash, ScalarEq> map;
  Scalar fallback;
};

Scalar read_element(const Tensor& t, int64_t i) {
  Scalar v;
  v.type = t.dtype();
  if (t.dtype() == DType::kString) v.s = string_at(t, i);
  else if (dtype_is_float(t.dtype())) v.f = t.scalar_as_double(i);
  else v.i = t.int_at(i);
  return v;
}

std::vector<Scalar> list_attr(const Node& n, const std::string& prefix, DType* type) {
  std::vector<Scalar> out;
  int found = 0;
  if (const Attribute* a = n.attr(prefix + "strings")) {
    ++found;
    *type = DType::kString;
    for (const auto& s : a->strings) out.push_back(Scalar{DType::kString, s, 0, 0});
  }
  if (const Attribute* a = n.attr(prefix + "int64s")) {
    ++found;
    *type = DType::kInt64;
    for (int64_t v : a->ints) out.push_back(Scalar{DType::kInt64, "", v, 0});
  }
  if (const Attribute* a = n.attr(prefix + "floats")) {
    ++found;
    *type = DType::kFloat;
    for (float v : a->floats) out.push_back(Scalar{DType::kFloat, "", 0, v});
  }
  if (const Tensor* t = n.attr_tensor(prefix + "tensor")) {
    ++found;
    *type = t->dtype();
    for (int64_t i = 0; i < t->numel(); ++i) out.push_back(read_element(*t, i));
  }
  MRT_ENFORCE(found == 1, MRT_INVALID_MODEL, n.label(), ": exactly one of ", prefix, "strings, ", prefix, "int64s, ",
              prefix, "floats and ", prefix, "tensor must be given (found ", found, ")");
  return out;
}

bool encodable(DType t) {
  return t == DType::kString || t == DType::kInt64 || t == DType::kInt32 || t == DType::kInt16 ||
         t == DType::kFloat || t == DType::kDouble;
}

std::shared_ptr<Encoder> make_encoder(const Node& n, int64_t opset) {
  auto e = std::make_shared<Encoder>();
  if (opset < 2) {  // classes_strings: string -> index, or index -> string
    const Attribute* a = n.attr("classes_strings");
    MRT_ENFORCE(a && a->type == AttrType::kStrings, MRT_INVALID_MODEL, n.label(), ": classes_strings is required");
    const bool has_int = n.has_attr("default_int64");
    const bool has_str = n.has_attr("default_string");
    // The direction follows from the input type at run time; both maps are built.
    for (size_t k = 0; k < a->strings.size(); ++k) {
      e->map.emplace(Scalar{DType::kString, a->strings[k], 0, 0}, Scalar{DType::kInt64, "", static_cast<int64_t>(k), 0});
      e->map.emplace(Scalar{DType::kInt64, "", static_cast<int64_t>(k), 0}, Scalar{DType::kString, a->strings[k], 0, 0});
    }
    e->fallback = Scalar{DType::kUndefined, has_str ? n.attr_string("default_string", "_Unused") : "_Unused",
                         has_int ? n.attr_int("default_int64", -1) : -1, 0};
    return e;
  }
  std::vector<Scalar> keys = list_attr(n, "keys_", &e->key_type);
  std::vector<Scalar> values = list_attr(n, "values_", &e->value_type);
  MRT_ENFORCE(keys.size() == values.size(), MRT_INVALID_MODEL, n.label(), ": ", keys.size(), " keys but ",
              values.size(), " values");
  MRT_ENFORCE(encodable(e->key_type) && encodable(e->value_type), MRT_NOT_IMPLEMENTED, n.label(),
              ": LabelEncoder from ", dtype_name(e->key_type), " to ", dtype_name(e->value_type), " is not supported");
  for (size_t k = 0; k < keys.size(); ++k) e->map.emplace(keys[k], values[k]);  // the first of equal keys wins
  e->fallback.type = e->value_type;
  if (const Tensor* d = n.attr_tensor("default_tensor")) {
    MRT_ENFORCE(d->numel() == 1 && d->dtype() == e->value_type, MRT_INVALID_MODEL, n.label(),
                ": default_tensor must hold one ", dtype_name(e->value_type), " value, got ", d->describe());
    e->fallback = read_element(*d, 0);
  } else if (e->value_type == DType::kString) {
    e->fallback.s = n.attr_string("default_string", "_Unused");
  } else if (dtype_is_float(e->value_type)) {
    e->fallback.f = n.attr_float("default_float", -0.f);
  } else {
    e->fallback.i = n.attr_int("default_int64", -1);
  }
  return e;
}

void label_encoder_check(const Node& n, int64_t opset) { (void)make_encoder(n, opset); }

void label_encoder_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto e = ctx.node_cache<Encoder>([&] { return make_encoder(ctx.node(), ctx.opset()); });
  DType out_type = e->value_type;
  if (ctx.opset() < 2) {
    MRT_CHECK_ARG(x.dtype() == DType::kString || x.dtype() == DType::kInt64,
                  "LabelEncoder-1 takes string or int64 input, got ", x.describe());
    out_type = x.dtype() == DType::kString ? DType::kInt64 : DType::kString;
  } else {
    MRT_CHECK_ARG(x.dtype() == e->key_type, "LabelEncoder input is ", x.describe(), " but its keys are ",
                  dtype_name(e->key_type));
  }
  Tensor& y = ctx.output(0, out_type, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto it = e->map.find(read_element(x, i));
    const Scalar& v = it == e->map.end() ? e->fallback : it->second;
    switch (out_type) {
      case DType::kString: set_string(y, i, v.s); break;
      case DType::kFloat: y.data<float>()[i] = static_cast<float>(v.f); break;
      case DType::kDouble: y.data<double>()[i] = v.f; break;
      case DType::kInt64: y.data<int64_t>()[i] = v.i; break;
      case DType::kInt32: y.data<int32_t>()[i] = static_cast<int32_t>(v.i); break;
      case DType::kInt16: y.data<int16_t>()[i] = static_cast<int16_t>(v.i); break;
      default: fail(MRT_NOT_IMPLEMENTED, "LabelEncoder output type ", dtype_name(out_type));
    }
  }
}

// ---- CategoryMapper (ai.onnx.ml) -----------------------------------------------------------------

struct Categories {
  std::unordered_map<std::string, int64_t> to_int;
  std::unordered_map<int64_t, std::string> to_string;
};

std::shared_ptr<Categories> make_categories(const Node& n) {
  const Attribute* s = n.attr("cats_strings");
  const Attribute* i = n.attr("cats_int64s");
  MRT_ENFORCE(s && i && s->strings.size() == i->ints.size(), MRT_INVALID_MODEL, n.label(),
              ": cats_strings and cats_int64s are required and must have the same length");
  auto c = std::make_shared<Categories>();
  for (size_t k = 0; k < s->strings.size(); ++k) {
    c->to_int.emplace(s->strings[k], i->ints[k]);
    c->to_string.emplace(i->ints[k], s->strings[k]);
  }
  return c;
}

void category_mapper_check(const Node& n, int64_t) { (void)make_categories(n); }

void category_mapper_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto c = ctx.node_cache<Categories>([&] { return make_categories(ctx.node()); });
  if (x.dtype() == DType::kString) {
    const int64_t def = ctx.node().attr_int("default_int64", -1);
    Tensor& y = ctx.output(0, DType::kInt64, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto it = c->to_int.find(string_at(x, i));
      y.data<int64_t>()[i] = it == c->to_int.end() ? def : it->second;
    }
    return;
  }
  MRT_CHECK_ARG(x.dtype() == DType::kInt64, "CategoryMapper takes string or int64 input, got ", x.describe());
  const std::string def = ctx.node().attr_string("default_string", "_Unused");
  Tensor& y = ctx.output(0, DType::kString, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto it = c->to_string.find(x.data<int64_t>()[i]);
    set_string(y, i, it == c->to_string.end() ? def : it->second);
  }
}

}  // namespace

void string_equal(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_strings(a, "Equal input A");
  require_strings(b, "Equal input B");
  const Shape out = broadcast_shapes(a.shape(), b.shape());
  Tensor& y = ctx.output(0, DType::kBool, out);
  bool* dst = y.data<bool>();
  for_each_broadcast(a, b, out, [&](int64_t i, int64_t ia, int64_t ib) { dst[i] = string_at(a, ia) == string_at(b, ib); });
}

namespace {

// Numbers as onnxruntime writes them: 8 significant digits ("%.8g"), "NaN", "INF", "-INF".
std::string format_float(double v) {
  if (v != v) return "NaN";
  if (v == std::numeric_limits<double>::infinity()) return "INF";
  if (v == -std::numeric_limits<double>::infinity()) return "-INF";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.8g", v);
  return buf;
}

std::string format_element(const Tensor& x, int64_t i) {
  switch (x.dtype()) {
    case DType::kFloat: case DType::kDouble: case DType::kFloat16: case DType::kBFloat16:
      return format_float(x.scalar_as_double(i));
    case DType::kUInt64: return std::to_string(x.data<uint64_t>()[i]);
    case DType::kBool: return x.data<bool>()[i] ? "1" : "0";
    default: return std::to_string(x.int_at(i));
  }
}

bool equals_ignoring_case(const std::string& a, const char* b) {
  size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (size_t k = 0; k < n; ++k)
    if (std::tolower(static_cast<unsigned char>(a[k])) != std::tolower(static_cast<unsigned char>(b[k]))) return false;
  return true;
}

// A number in plain or scientific notation, or (any case) "INF", "+INF", "-INF", "NaN"; surrounding
// whitespace is ignored. Throws naming the string when it is not a number.
double parse_number(const std::string& s, int64_t i, DType to) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  const std::string t = s.substr(b, e - b);
  if (equals_ignoring_case(t, "inf") || equals_ignoring_case(t, "+inf")) return std::numeric_limits<double>::infinity();
  if (equals_ignoring_case(t, "-inf")) return -std::numeric_limits<double>::infinity();
  if (equals_ignoring_case(t, "nan") || equals_ignoring_case(t, "+nan") || equals_ignoring_case(t, "-nan"))
    return std::numeric_limits<double>::quiet_NaN();
  if (to == DType::kBool) {
    if (equals_ignoring_case(t, "true")) return 1;
    if (equals_ignoring_case(t, "false")) return 0;
  }
  char* end = nullptr;
  const double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
  MRT_CHECK_ARG(!t.empty() && end == t.c_str() + t.size(), "Cast: element ", i, " ('", s.substr(0, 64),
                "') is not a number");
  return v;
}

template <class T>
T saturate_to(double v) {
  if (v != v) return 0;
  const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  return v <= lo ? std::numeric_limits<T>::lowest() : v >= hi ? std::numeric_limits<T>::max() : static_cast<T>(v);
}

// Integer strings convert exactly (all 64 bits); others through double, truncated toward zero.
template <class T>
T parse_integer(const std::string& s, int64_t i) {
  errno = 0;
  char* end = nullptr;
  if (std::is_signed<T>::value) {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0 && end != s.c_str() && *end == '\0')
      return static_cast<T>(std::clamp<long long>(v, static_cast<long long>(std::numeric_limits<T>::lowest()),
                                                  static_cast<long long>(std::numeric_limits<T>::max())));
  } else if (!s.empty() && s[0] != '-') {
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (errno == 0 && end != s.c_str() && *end == '\0')
      return static_cast<T>(std::min<unsigned long long>(v, std::numeric_limits<T>::max()));
  }
  return saturate_to<T>(std::trunc(parse_number(s, i, DTypeOf<T>::value)));
}

}  // namespace

void string_cast(OpContext& ctx, const Tensor& x, DType to) {
  if (x.dtype() == DType::kString && to == DType::kString) {
    ctx.set_output(0, x);
    return;
  }
  if (to == DType::kString) {
    MRT_CHECK_IMPL(dtype_is_plain(x.dtype()) && !dtype_is_narrow(x.dtype()), "cast from ", dtype_name(x.dtype()),
                   " to string is not supported");
    Tensor& y = ctx.output(0, DType::kString, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) set_string(y, i, format_element(x, i));
    return;
  }
  MRT_CHECK_IMPL(dtype_is_plain(to) && !dtype_is_narrow(to), "cast from string to ", dtype_name(to),
                 " is not supported");
  Tensor& y = ctx.output(0, to, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string& s = string_at(x, i);
    switch (to) {
      case DType::kFloat: y.data<float>()[i] = static_cast<float>(parse_number(s, i, to)); break;
      case DType::kDouble: y.data<double>()[i] = parse_number(s, i, to); break;
      case DType::kFloat16: y.data<Float16>()[i].bits = float_to_half(static_cast<float>(parse_number(s, i, to))); break;
      case DType::kBFloat16:
        y.data<BFloat16>()[i].bits = float_to_bfloat16(static_cast<float>(parse_number(s, i, to)));
        break;
      case DType::kBool: y.data<bool>()[i] = parse_number(s, i, to) != 0; break;
      case DType::kInt8: y.data<int8_t>()[i] = parse_integer<int8_t>(s, i); break;
      case DType::kInt16: y.data<int16_t>()[i] = parse_integer<int16_t>(s, i); break;
      case DType::kInt32: y.data<int32_t>()[i] = parse_integer<int32_t>(s, i); break;
      case DType::kInt64: y.data<int64_t>()[i] = parse_integer<int64_t>(s, i); break;
      case DType::kUInt8: y.data<uint8_t>()[i] = parse_integer<uint8_t>(s, i); break;
      case DType::kUInt16: y.data<uint16_t>()[i] = parse_integer<uint16_t>(s, i); break;
      case DType::kUInt32: y.data<uint32_t>()[i] = parse_integer<uint32_t>(s, i); break;
      case DType::kUInt64: y.data<uint64_t>()[i] = parse_integer<uint64_t>(s, i); break;
      default: fail(MRT_NOT_IMPLEMENTED, "cast from string to ", dtype_name(to), " is not supported");
    }
  }
}

void register_string_kernels(KernelRegistry& r) {
  r.add("StringNormalizer", 10, string_normalizer_kernel, string_normalizer_check);
  r.add("StringConcat", 20, string_concat_kernel);
  r.add("StringSplit", 20, string_split_kernel);
  r.add("RegexFullMatch", 20, regex_full_match_kernel, regex_full_match_check);
  r.add_domain("ai.onnx.ml", "LabelEncoder", 1, label_encoder_kernel, label_encoder_check);
  r.add_domain("ai.onnx.ml", "CategoryMapper", 1, category_mapper_kernel, category_mapper_check);
}

}  // namespace mrt
