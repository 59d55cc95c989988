#include "http/metrics.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "base/status.h"

namespace th::http {

// --- Values

void Counter::inc(double v) {
  if (!(v > 0)) return;  // negative, zero or NaN
  v_.fetch_add(v, std::memory_order_relaxed);
}

void Counter::set_to_at_least(double v) {
  double cur = v_.load(std::memory_order_relaxed);
  while (cur < v && !v_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(std::span<const double> bounds) : bounds_(bounds), counts_(bounds.size() + 1, 0) {}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  // The first bound >= v: buckets are `le`, upper bounds inclusive.
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard<std::mutex> l(m_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot s;
  s.cumulative.resize(counts_.size());
  std::lock_guard<std::mutex> l(m_);
  uint64_t acc = 0;
  for (size_t i = 0; i < counts_.size(); ++i) s.cumulative[i] = acc += counts_[i];
  s.sum = sum_;
  s.count = count_;
  return s;
}

// --- Formatting

void append_metric_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[40];
  std::to_chars_result r;
  // Up to 2^53 every integer is exact: print it as one ("42", not "42.0" or "4.2e+01").
  if (v == std::trunc(v) && std::fabs(v) <= 9007199254740992.0)
    r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
  else
    r = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that reads back as v
  out.append(buf, r.ptr);
}

void append_escaped_help(std::string& out, std::string_view s) {
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

void append_escaped_label_value(std::string& out, std::string_view s) {
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

namespace {

bool is_alpha_(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// `name{a="x",b="y"` without the closing brace; nothing when there are no labels and no `le`.
void append_series(std::string& out, std::string_view name, std::string_view suffix,
                   const std::vector<std::string>& label_names, const std::vector<std::string>& values,
                   const double* le) {
  out += name;
  out += suffix;
  if (label_names.empty() && !le) return;
  out += '{';
  for (size_t i = 0; i < label_names.size(); ++i) {
    if (i) out += ',';
    out += label_names[i];
    out += "=\"";
    append_escaped_label_value(out, values[i]);
    out += '"';
  }
  if (le) {
    if (!label_names.empty()) out += ',';
    out += "le=\"";
    append_metric_value(out, *le);
    out += '"';
  }
  out += '}';
}

void append_sample_value(std::string& out, double v) {
  out += ' ';
  append_metric_value(out, v);
  out += '\n';
}

std::string_view type_name(MetricType t) {
  switch (t) {
    case MetricType::Counter: return "counter";
    case MetricType::Gauge: return "gauge";
    case MetricType::Histogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

bool is_valid_metric_name(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  if (!is_alpha_(name[0]) && name[0] != ':') return false;
  for (char c : name)
    if (!is_alpha_(c) && !is_digit(c) && c != ':') return false;
  return true;
}

bool is_valid_label_name(std::string_view name) {
  if (name.empty() || name.starts_with("__") || !is_alpha_(name[0])) return false;
  for (char c : name)
    if (!is_alpha_(c) && !is_digit(c)) return false;
  return true;
}

// --- Families

void MetricFamilyBase::render_to(std::string& out) const {
  out += "# HELP ";
  out += name_;
  out += ' ';
  append_escaped_help(out, help_);
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += type_name(type());
  out += '\n';
  render_samples(out);
}

void MetricFamilyBase::check_arity(size_t n) const {
  if (n != label_names_.size())
    throw std::invalid_argument(cat("metrics: ", name_, " has ", label_names_.size(), " labels, given ", n, " values"));
}

template <class M>
M& MetricFamily<M>::with(std::span<const std::string_view> values) {
  check_arity(values.size());
  {
    std::shared_lock<std::shared_mutex> l(m_);
    if (auto it = children_.find(values); it != children_.end()) return *it->second;
  }
  std::unique_lock<std::shared_mutex> l(m_);
  if (auto it = children_.find(values); it != children_.end()) return *it->second;  // made meanwhile
  std::unique_ptr<M> child;
  if constexpr (std::is_same_v<M, Histogram>) child = std::make_unique<Histogram>(bounds_);
  else child = std::make_unique<M>();
  M& ref = *child;
  children_.emplace(std::vector<std::string>(values.begin(), values.end()), std::move(child));
  return ref;
}

template <class M>
void MetricFamily<M>::render_samples(std::string& out) const {
  std::shared_lock<std::shared_mutex> l(m_);
  for (const auto& [values, child] : children_) {
    if constexpr (std::is_same_v<M, Histogram>) {
      const HistogramSnapshot s = child->snapshot();
      for (size_t i = 0; i < bounds_.size(); ++i) {
        append_series(out, name(), "_bucket", label_names(), values, &bounds_[i]);
        append_sample_value(out, static_cast<double>(s.cumulative[i]));
      }
      const double inf = std::numeric_limits<double>::infinity();
      append_series(out, name(), "_bucket", label_names(), values, &inf);
      append_sample_value(out, static_cast<double>(s.count));
      append_series(out, name(), "_sum", label_names(), values, nullptr);
      append_sample_value(out, s.sum);
      append_series(out, name(), "_count", label_names(), values, nullptr);
      append_sample_value(out, static_cast<double>(s.count));
    } else {
      append_series(out, name(), "", label_names(), values, nullptr);
      append_sample_value(out, child->value());
    }
  }
}

template class MetricFamily<Counter>;
template class MetricFamily<Gauge>;
template class MetricFamily<Histogram>;

// --- Registry

template <class M>
MetricFamily<M>& MetricsRegistry::add(std::string name, std::string help, std::vector<std::string> label_names,
                                      std::vector<double> bounds) {
  if (!is_valid_metric_name(name)) throw std::invalid_argument(cat("metrics: invalid metric name '", name, "'"));
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& l = label_names[i];
    if (!is_valid_label_name(l))
      throw std::invalid_argument(cat("metrics: ", name, ": invalid label name '", l, "'"));
    // `le` is the bucket label: a family of any type carrying it would read as a histogram's buckets.
    if (l == "le") throw std::invalid_argument(cat("metrics: ", name, ": the label name 'le' is reserved"));
    for (size_t j = 0; j < i; ++j)
      if (label_names[j] == l) throw std::invalid_argument(cat("metrics: ", name, ": label '", l, "' repeated"));
  }
  if constexpr (std::is_same_v<M, Histogram>) {
    if (!bounds.empty() && bounds.back() == std::numeric_limits<double>::infinity()) bounds.pop_back();
    for (size_t i = 0; i < bounds.size(); ++i)
      if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1])))
        throw std::invalid_argument(cat("metrics: ", name, ": bucket bounds must be finite and strictly increasing"));
  }
  const bool unlabeled = label_names.empty();
  std::lock_guard<std::mutex> l(m_);
  // A histogram's series are name_bucket, name_sum and name_count: none may collide with another family.
  auto series = [](const MetricFamilyBase& f) {
    std::vector<std::string> s{f.name()};
    if (f.type() == MetricType::Histogram)
      for (const char* suffix : {"_bucket", "_sum", "_count"}) s.push_back(f.name() + suffix);
    return s;
  };
  auto fam = std::make_unique<MetricFamily<M>>(detail::RegistryKey{}, std::move(name), std::move(help),
                                               std::move(label_names), std::move(bounds));
  for (const std::string& mine : series(*fam))
    for (const auto& other : families_)
      for (const std::string& theirs : series(*other))
        if (mine == theirs) throw std::invalid_argument(cat("metrics: ", mine, " is registered twice"));
  MetricFamily<M>& ref = *fam;
  families_.push_back(std::move(fam));
  if (unlabeled) ref.with();
  return ref;
}

CounterFamily& MetricsRegistry::counter(std::string name, std::string help, std::vector<std::string> label_names) {
  return add<Counter>(std::move(name), std::move(help), std::move(label_names), {});
}

GaugeFamily& MetricsRegistry::gauge(std::string name, std::string help, std::vector<std::string> label_names) {
  return add<Gauge>(std::move(name), std::move(help), std::move(label_names), {});
}

HistogramFamily& MetricsRegistry::histogram(std::string name, std::string help, std::vector<double> bounds,
                                            std::vector<std::string> label_names) {
  return add<Histogram>(std::move(name), std::move(help), std::move(label_names), std::move(bounds));
}

void MetricsRegistry::render_to(std::string& out) const {
  std::lock_guard<std::mutex> l(m_);
  for (const auto& f : families_) f->render_to(out);
}

std::string MetricsRegistry::render() const {
  std::string out;
  out.reserve(4096);
  render_to(out);
  return out;
}

}  // namespace th::http
