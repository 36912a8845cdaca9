// The ai.onnx.ml operators that scikit-learn converters emit for preprocessing and linear models:
// Scaler, Normalizer, Imputer, OneHotEncoder, FeatureVectorizer, LinearRegressor, LinearClassifier and
// ZipMap (which turns class scores into a sequence of maps, one per row). Inputs are float, double,
// int64 or int32 (strings for OneHotEncoder); outputs are float like onnxruntime's, computed in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "ml_common.h"
#include "norm_util.h"

namespace mrt {
namespace ml {

// ---- post transforms (linear models, tree classifiers) -------------------------------------------

Post post_transform(const Node& n) {
  const std::string p = n.attr_string("post_transform", "NONE");
  if (p == "NONE") return Post::kNone;
  if (p == "LOGISTIC") return Post::kLogistic;
  if (p == "SOFTMAX") return Post::kSoftmax;
  if (p == "SOFTMAX_ZERO") return Post::kSoftmaxZero;
  if (p == "PROBIT") return Post::kProbit;
  fail(MRT_INVALID_MODEL, n.label(), ": post_transform '", p, "' is not NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT");
}

namespace {

double logistic(double v) {
  const double e = 1.0 / (1.0 + std::exp(-std::fabs(v)));
  return v < 0 ? 1.0 - e : e;
}

// sqrt(2) * erfinv(2p - 1) with the closed-form erfinv approximation (a = 0.147) the ONNX ML
// operators are defined with.
double probit(double p) {
  const double x = 2 * p - 1;
  const double sign = x < 0 ? -1.0 : 1.0;
  const double w = (1.0 - x) * (1.0 + x);
  if (w == 0) return 0;
  const double l = std::log(w);
  const double a = 2.0 / (3.14159265358979323846 * 0.147) + 0.5 * l;
  return 1.41421356 * sign * std::sqrt(-a + std::sqrt(a * a - l / 0.147));
}

}  // namespace

void apply_post(Post post, double* row, int64_t n) {
  switch (post) {
    case Post::kNone: return;
    case Post::kLogistic:
      for (int64_t j = 0; j < n; ++j) row[j] = logistic(row[j]);
      return;
    case Post::kProbit:
      for (int64_t j = 0; j < n; ++j) row[j] = probit(row[j]);
      return;
    case Post::kSoftmax: {
      const double mx = *std::max_element(row, row + n);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += (row[j] = std::exp(row[j] - mx));
      for (int64_t j = 0; j < n; ++j) row[j] /= sum;
      return;
    }
    case Post::kSoftmaxZero: {  // softmax over the non-zero scores; zeros stay (nearly) zero
      const double mx = *std::max_element(row, row + n);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        row[j] = std::fabs(row[j]) > 1e-7 ? std::exp(row[j] - mx) : row[j] * std::exp(-mx);
        sum += row[j];
      }
      for (int64_t j = 0; j < n; ++j) row[j] = sum == 0 ? 0.5 : row[j] / sum;
      return;
    }
  }
}

}  // namespace ml

namespace {

using ml::apply_post;
using ml::Post;
using ml::post_transform;

// Rows x columns view of a 1-D ([C], one row) or 2-D input.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
};

std::vector<double> doubles_of(const Tensor& x) {
  std::vector<double> v(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) v[static_cast<size_t>(i)] = x.scalar_as_double(i);
  return v;
}

Matrix read_matrix(const Tensor& x, const char* what) {
  MRT_CHECK_ARG(x.rank() == 1 || x.rank() == 2, what, " must be 1-D or 2-D, got ", x.describe());
  MRT_CHECK_ARG(x.dtype() == DType::kFloat || x.dtype() == DType::kDouble || x.dtype() == DType::kInt64 ||
                    x.dtype() == DType::kInt32,
                what, " must be float, double, int64 or int32, got ", x.describe());
  Matrix m;
  m.rows = x.rank() == 2 ? x.dim(0) : 1;
  m.cols = x.rank() == 2 ? x.dim(1) : x.dim(0);
  m.v = doubles_of(x);
  return m;
}

// Per-column attribute values: one value for every column, or one per column.
double per_column(const std::vector<float>& v, int64_t c) {
  return v.size() == 1 ? v[0] : v[static_cast<size_t>(c)];
}

void check_per_column(const Node& n, const char* name, size_t size, int64_t cols, bool allow_empty) {
  MRT_CHECK_ARG((allow_empty && size == 0) || size == 1 || static_cast<int64_t>(size) == cols, n.label(), ": ", name,
                " has ", size, " values for ", cols, " columns (1 or one per column)");
}

// ---- Scaler, Normalizer, Imputer -----------------------------------------------------------------

void scaler_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Matrix x = read_matrix(ctx.input(0), "Scaler input");
  const std::vector<float> offset = n.attr_floats("offset"), scale = n.attr_floats("scale");
  check_per_column(n, "offset", offset.size(), x.cols, true);
  check_per_column(n, "scale", scale.size(), x.cols, true);
  Tensor& y = ctx.output(0, DType::kFloat, ctx.input(0).shape());
  float* out = y.data<float>();
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c) {
      const double v = x.v[static_cast<size_t>(r * x.cols + c)] - (offset.empty() ? 0.0 : per_column(offset, c));
      out[r * x.cols + c] = static_cast<float>(v * (scale.empty() ? 1.0 : per_column(scale, c)));
    }
}

void normalizer_check(const Node& n, int64_t) {
  const std::string norm = n.attr_string("norm", "MAX");
  MRT_ENFORCE(norm == "MAX" || norm == "L1" || norm == "L2", MRT_INVALID_MODEL, n.label(), ": norm '", norm,
              "' is not MAX, L1 or L2");
}

void normalizer_kernel(OpContext& ctx) {
  const std::string norm = ctx.node().attr_string("norm", "MAX");
  const Matrix x = read_matrix(ctx.input(0), "Normalizer input");
  Tensor& y = ctx.output(0, DType::kFloat, ctx.input(0).shape());
  float* out = y.data<float>();
  for (int64_t r = 0; r < x.rows; ++r) {
    const double* row = &x.v[static_cast<size_t>(r * x.cols)];
    double d = 0;
    for (int64_t c = 0; c < x.cols; ++c) {
      if (norm == "MAX") d = std::max(d, std::fabs(row[c]));
      else if (norm == "L1") d += std::fabs(row[c]);
      else d += row[c] * row[c];
    }
    if (norm == "L2") d = std::sqrt(d);
    d = std::max(d, 1e-30);  // an all-zero row stays zero
    for (int64_t c = 0; c < x.cols; ++c) out[r * x.cols + c] = static_cast<float>(row[c] / d);
  }
}

void imputer_check(const Node& n, int64_t) {
  MRT_ENFORCE(!n.attr_floats("imputed_value_floats").empty() || !n.attr_ints("imputed_value_int64s").empty(),
              MRT_INVALID_MODEL, n.label(), ": imputed_value_floats or imputed_value_int64s is required");
}

void imputer_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = ctx.input(0);
  MRT_CHECK_ARG(x.rank() == 1 || x.rank() == 2, "Imputer input must be 1-D or 2-D, got ", x.describe());
  const int64_t cols = x.rank() == 2 ? x.dim(1) : x.dim(0);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  if (x.dtype() == DType::kFloat || x.dtype() == DType::kDouble) {
    const std::vector<float> values = n.attr_floats("imputed_value_floats");
    MRT_CHECK_ARG(!values.empty(), "Imputer: a float input needs imputed_value_floats");
    check_per_column(n, "imputed_value_floats", values.size(), cols, false);
    const double replaced = n.attr_float("replaced_value_float", 0.f);
    MRT_DISPATCH_FLOATING(x.dtype(), "Imputer", {
      const T* in = x.data<T>();
      T* out = y.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double v = static_cast<double>(in[i]);
        const bool hit = std::isnan(replaced) ? std::isnan(v) : v == replaced;
        out[i] = hit ? static_cast<T>(per_column(values, i % cols)) : in[i];
      }
    });
    return;
  }
  MRT_CHECK_ARG(x.dtype() == DType::kInt64, "Imputer input must be float, double or int64, got ", x.describe());
  const std::vector<int64_t> values = n.attr_ints("imputed_value_int64s");
  MRT_CHECK_ARG(!values.empty(), "Imputer: an int64 input needs imputed_value_int64s");
  MRT_CHECK_ARG(values.size() == 1 || static_cast<int64_t>(values.size()) == cols, "Imputer: imputed_value_int64s has ",
                values.size(), " values for ", cols, " columns");
  const int64_t replaced = n.attr_int("replaced_value_int64", 0);
  const int64_t* in = x.data<int64_t>();
  int64_t* out = y.data<int64_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    out[i] = in[i] == replaced ? values[values.size() == 1 ? 0 : static_cast<size_t>(i % cols)] : in[i];
}

// ---- OneHotEncoder, FeatureVectorizer ------------------------------------------------------------

void one_hot_check(const Node& n, int64_t) {
  MRT_ENFORCE(n.has_attr("cats_int64s") != n.has_attr("cats_strings"), MRT_INVALID_MODEL, n.label(),
              ": exactly one of cats_int64s and cats_strings must be given");
}

void one_hot_encoder_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = ctx.input(0);
  const bool zeros = n.attr_int("zeros", 1) != 0;
  std::map<std::string, int64_t> by_string;
  std::map<int64_t, int64_t> by_int;
  int64_t cats = 0;
  if (const Attribute* s = n.attr("cats_strings")) {
    for (const auto& v : s->strings) by_string.emplace(v, cats++);
    MRT_CHECK_ARG(x.dtype() == DType::kString, "OneHotEncoder with cats_strings takes strings, got ", x.describe());
  } else {
    for (int64_t v : n.attr_ints("cats_int64s")) by_int.emplace(v, cats++);
    MRT_CHECK_ARG(x.dtype() != DType::kString, "OneHotEncoder with cats_int64s takes numbers, got ", x.describe());
  }
  Shape shape = x.shape();
  shape.push_back(cats);
  Tensor& y = ctx.output(0, DType::kFloat, shape);
  float* out = y.data<float>();
  std::fill(out, out + y.numel(), 0.f);
  const std::vector<double> nums = x.dtype() == DType::kString ? std::vector<double>() : doubles_of(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t at = -1;
    if (x.dtype() == DType::kString) {
      auto it = by_string.find(string_at(x, i));
      if (it != by_string.end()) at = it->second;
    } else {
      const double v = nums[static_cast<size_t>(i)];
      auto it = v == std::trunc(v) && std::fabs(v) < 9.2e18 ? by_int.find(static_cast<int64_t>(v)) : by_int.end();
      if (it != by_int.end()) at = it->second;
    }
    MRT_CHECK_ARG(at >= 0 || zeros, "OneHotEncoder: element ", i, " is not a known category (and zeros = 0)");
    if (at >= 0) out[i * cats + at] = 1.f;
  }
}

void feature_vectorizer_kernel(OpContext& ctx) {
  const std::vector<int64_t> dims = ctx.node().attr_ints("inputdimensions");
  MRT_CHECK_ARG(dims.size() == ctx.input_count(), "FeatureVectorizer: inputdimensions has ", dims.size(),
                " entries for ", ctx.input_count(), " inputs");
  int64_t total = 0;
  for (int64_t d : dims) {
    MRT_CHECK_ARG(d >= 0, "FeatureVectorizer: negative input dimension ", d);
    total += d;
  }
  std::vector<Matrix> parts;
  int64_t rows = -1;
  for (size_t i = 0; i < ctx.input_count(); ++i) {
    parts.push_back(read_matrix(ctx.input(i), "FeatureVectorizer input"));
    MRT_CHECK_ARG(rows < 0 || parts.back().rows == rows, "FeatureVectorizer: inputs have ", rows, " and ",
                  parts.back().rows, " rows");
    rows = parts.back().rows;
  }
  Tensor& y = ctx.output(0, DType::kFloat, Shape{std::max<int64_t>(rows, 0), total});
  float* out = y.data<float>();
  std::fill(out, out + y.numel(), 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {  // each input padded with zeros or cut to its dimension
      const int64_t take = std::min(parts[i].cols, dims[i]);
      for (int64_t c = 0; c < take; ++c)
        out[r * total + at + c] = static_cast<float>(parts[i].v[static_cast<size_t>(r * parts[i].cols + c)]);
      at += dims[i];
    }
  }
}

// ---- LinearRegressor, LinearClassifier ------------------------------------------------------------

struct Linear {
  std::vector<float> coef, intercepts;
  int64_t rows = 0;  // targets or classes of coefficients
};

Linear linear_params(const Node& n, int64_t rows, int64_t cols) {
  Linear l;
  l.coef = n.attr_floats("coefficients");
  l.intercepts = n.attr_floats("intercepts");
  l.rows = rows;
  MRT_CHECK_ARG(static_cast<int64_t>(l.coef.size()) == rows * cols, n.label(), ": ", l.coef.size(),
                " coefficients for ", rows, " rows of ", cols, " input features");
  MRT_CHECK_ARG(l.intercepts.empty() || static_cast<int64_t>(l.intercepts.size()) == rows, n.label(), ": ",
                l.intercepts.size(), " intercepts for ", rows, " rows");
  return l;
}

// scores[r, t] = x[r] . coef[t] + intercept[t]
std::vector<double> linear_scores(const Linear& l, const Matrix& x) {
  std::vector<double> s(static_cast<size_t>(x.rows * l.rows));
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t t = 0; t < l.rows; ++t) {
      double acc = l.intercepts.empty() ? 0.0 : l.intercepts[static_cast<size_t>(t)];
      for (int64_t c = 0; c < x.cols; ++c)
        acc += x.v[static_cast<size_t>(r * x.cols + c)] * l.coef[static_cast<size_t>(t * x.cols + c)];
      s[static_cast<size_t>(r * l.rows + t)] = acc;
    }
  return s;
}

void linear_regressor_check(const Node& n, int64_t) {
  const Post p = post_transform(n);
  MRT_ENFORCE(p == Post::kNone || p == Post::kProbit, MRT_NOT_IMPLEMENTED, n.label(),
              ": LinearRegressor post_transform must be NONE or PROBIT");
}

void linear_regressor_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Matrix x = read_matrix(ctx.input(0), "LinearRegressor input");
  const int64_t targets = n.attr_int("targets", 1);
  MRT_CHECK_ARG(targets >= 1 && targets <= static_cast<int64_t>(n.attr_floats("coefficients").size()), n.label(),
                ": targets must be between 1 and the number of coefficients, got ", targets);
  const Linear l = linear_params(n, targets, x.cols);
  std::vector<double> s = linear_scores(l, x);
  const Post post = post_transform(n);
  for (int64_t r = 0; r < x.rows; ++r) apply_post(post, &s[static_cast<size_t>(r * targets)], targets);
  Tensor& y = ctx.output(0, DType::kFloat, Shape{x.rows, targets});
  norm::from_doubles(y, s);
}

void linear_classifier_check(const Node& n, int64_t) {
  (void)post_transform(n);
  MRT_ENFORCE(n.has_attr("classlabels_ints") != n.has_attr("classlabels_strings"), MRT_INVALID_MODEL, n.label(),
              ": exactly one of classlabels_ints and classlabels_strings must be given");
}

void linear_classifier_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Matrix x = read_matrix(ctx.input(0), "LinearClassifier input");
  const std::vector<int64_t> int_labels = n.attr_ints("classlabels_ints");
  const Attribute* str_attr = n.attr("classlabels_strings");
  const bool strings = str_attr != nullptr;
  const int64_t classes = strings ? static_cast<int64_t>(str_attr->strings.size()) : static_cast<int64_t>(int_labels.size());
  const int64_t coef_rows = x.cols ? static_cast<int64_t>(n.attr_floats("coefficients").size()) / x.cols : 0;
  MRT_CHECK_ARG(coef_rows >= 1, n.label(), ": no coefficients for ", x.cols, " input features");
  const Linear l = linear_params(n, coef_rows, x.cols);
  std::vector<double> s = linear_scores(l, x);
  // One row of coefficients for two classes (onnxruntime's layout): the label is class 1 when the score
  // s > 0; the scores are [1 - v, v] with v = s, or its LOGISTIC / PROBIT transform (the softmaxes of a
  // single score leave it as it is).
  const bool binary = coef_rows == 1 && classes == 2;
  const int64_t width = binary ? 2 : coef_rows;
  const Post post = post_transform(n);
  std::vector<int64_t> binary_label;
  if (binary) {
    std::vector<double> two(static_cast<size_t>(x.rows * 2));
    for (int64_t r = 0; r < x.rows; ++r) {
      double v = s[static_cast<size_t>(r)];
      binary_label.push_back(v > 0 ? 1 : 0);
      if (post == Post::kLogistic || post == Post::kProbit) apply_post(post, &v, 1);
      two[static_cast<size_t>(2 * r)] = 1.0 - v;
      two[static_cast<size_t>(2 * r + 1)] = v;
    }
    s.swap(two);
  } else {
    for (int64_t r = 0; r < x.rows; ++r) apply_post(post, &s[static_cast<size_t>(r * width)], width);
  }
  Tensor& y = ctx.output(0, strings ? DType::kString : DType::kInt64, Shape{x.rows});
  for (int64_t r = 0; r < x.rows; ++r) {
    const double* row = &s[static_cast<size_t>(r * width)];
    int64_t k;
    if (binary) {
      k = binary_label[static_cast<size_t>(r)];
    } else if (width > 1) {
      k = std::max_element(row, row + width) - row;  // the first of equal maxima
    } else {  // one score: the first class when it reaches the threshold, else class "0"
      k = row[0] >= (post == Post::kNone ? 0.0 : 0.5) ? 0 : -1;
    }
    MRT_CHECK_ARG(k < classes, n.label(), ": score column ", k, " has no class label (", classes, " labels)");
    if (strings) set_string(y, r, k >= 0 ? str_attr->strings[static_cast<size_t>(k)] : std::string());
    else y.data<int64_t>()[r] = k >= 0 ? int_labels[static_cast<size_t>(k)] : 0;
  }
  if (ctx.has_output(1)) norm::from_doubles(ctx.output(1, DType::kFloat, Shape{x.rows, width}), s);
}

// ---- ZipMap ------------------------------------------------------------------------------------

void zip_map_check(const Node& n, int64_t) {
  MRT_ENFORCE(n.has_attr("classlabels_int64s") != n.has_attr("classlabels_strings"), MRT_INVALID_MODEL, n.label(),
              ": exactly one of classlabels_int64s and classlabels_strings must be given");
}

void zip_map_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = ctx.input(0);
  MRT_CHECK_ARG(x.dtype() == DType::kFloat && (x.rank() == 1 || x.rank() == 2), "ZipMap takes float [N, C] or [C], got ",
                x.describe());
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, cols = x.rank() == 2 ? x.dim(1) : x.dim(0);
  // The keys, made once and shared by every map of the sequence.
  Tensor keys;
  if (const Attribute* s = n.attr("classlabels_strings")) {
    MRT_CHECK_ARG(static_cast<int64_t>(s->strings.size()) == cols, "ZipMap: ", s->strings.size(), " labels for ", cols,
                  " columns");
    keys = Tensor(DType::kString, Shape{cols}, ctx.allocator());
    for (int64_t c = 0; c < cols; ++c) set_string(keys, c, s->strings[static_cast<size_t>(c)]);
  } else {
    const std::vector<int64_t> labels = n.attr_ints("classlabels_int64s");
    MRT_CHECK_ARG(static_cast<int64_t>(labels.size()) == cols, "ZipMap: ", labels.size(), " labels for ", cols,
                  " columns");
    keys = Tensor(DType::kInt64, Shape{cols}, ctx.allocator());
    std::copy(labels.begin(), labels.end(), keys.data<int64_t>());
  }
  std::vector<Tensor> maps;
  for (int64_t r = 0; r < rows; ++r) {
    Tensor values(DType::kFloat, Shape{cols}, ctx.allocator());
    std::copy(x.data<float>() + r * cols, x.data<float>() + (r + 1) * cols, values.data<float>());
    maps.push_back(Tensor::map(keys, values));
  }
  ctx.set_output(0, Tensor::sequence(DType::kUndefined, std::move(maps)));
}

}  // namespace

void register_ml_classic_kernels(KernelRegistry& r) {
  r.add_domain("ai.onnx.ml", "Scaler", 1, scaler_kernel);
  r.add_domain("ai.onnx.ml", "Normalizer", 1, normalizer_kernel, normalizer_check);
  r.add_domain("ai.onnx.ml", "Imputer", 1, imputer_kernel, imputer_check);
  r.add_domain("ai.onnx.ml", "OneHotEncoder", 1, one_hot_encoder_kernel, one_hot_check);
  r.add_domain("ai.onnx.ml", "FeatureVectorizer", 1, feature_vectorizer_kernel);
  r.add_domain("ai.onnx.ml", "LinearRegressor", 1, linear_regressor_kernel, linear_regressor_check);
  r.add_domain("ai.onnx.ml", "LinearClassifier", 1, linear_classifier_kernel, linear_classifier_check);
  r.add_domain("ai.onnx.ml", "ZipMap", 1, zip_map_kernel, zip_map_check);
}

}  // namespace mrt
