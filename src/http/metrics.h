// A small, dependency-free Prometheus client: a registry of metric families
// (counters, gauges, histograms), each with fixed label names and one child per
// tuple of label values, rendered in the text exposition format 0.0.4.
//
//   MetricsRegistry reg;
//   auto& requests = reg.counter("app_requests_total", "Requests served.", {"code"});
//   Counter& ok = requests.with({"200"});  // stable: look it up once, keep the reference
//   ok.inc();
//   std::string page = reg.render();
//
// Thread safety: everything may be called from any thread. Counters and gauges
// are lock-free atomic doubles; a histogram child takes its own mutex for an
// observation (uncontended it costs a few tens of ns) so that a render always
// sees a consistent (buckets, sum, count). `with` takes the family's shared lock
// to find a child and the exclusive one only to create it.
//
// Programming errors throw std::invalid_argument: a metric or label name that
// is not valid Prometheus ([a-zA-Z_:][a-zA-Z0-9_:]* for metrics,
// [a-zA-Z_][a-zA-Z0-9_]* for labels, no "__" prefix, `le` reserved for
// histogram buckets, no repeated label), a name registered twice, histogram
// bounds that are not finite and strictly increasing, and `with` given the wrong
// number of label values. Names are constants in the code that registers them,
// so these fire at start-up (and in tests), never on a request's path.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace th::http {

/// @brief A monotonically increasing value (requests served, tokens generated).
class Counter {
 public:
  /// @brief Adds `v`; a negative or NaN `v` is ignored (a counter never goes down).
  void inc(double v = 1);
  /// @brief Raises the value to `v` if it is below: for mirroring a cumulative count kept
  /// elsewhere (the engine's statistics snapshot) without ever going backwards.
  void set_to_at_least(double v);
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

/// @brief A value that goes up and down (requests running, blocks used).
class Gauge {
 public:
  void set(double v) { v_.store(v, std::memory_order_relaxed); }
  void inc(double v = 1) { v_.fetch_add(v, std::memory_order_relaxed); }
  void dec(double v = 1) { v_.fetch_add(-v, std::memory_order_relaxed); }
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

/// @brief A histogram's state at one instant: cumulative counts per bound (the last entry is
/// +Inf and equals `count`), the sum of the observations and their number.
struct HistogramSnapshot {
  std::vector<uint64_t> cumulative;
  double sum = 0;
  uint64_t count = 0;
};

/// @brief Counts observations into buckets of fixed upper bounds (inclusive: `v <= le`).
class Histogram {
 public:
  explicit Histogram(std::span<const double> bounds);  // the family's bounds, outliving this
  /// @brief Records `v`; NaN is ignored.
  void observe(double v);
  HistogramSnapshot snapshot() const;
  std::span<const double> bounds() const { return bounds_; }

 private:
  std::span<const double> bounds_;
  mutable std::mutex m_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; one more than bounds_ (+Inf)
  double sum_ = 0;
  uint64_t count_ = 0;
};

enum class MetricType : uint8_t { Counter, Gauge, Histogram };

/// @brief What every family has: name, help, label names; renders itself.
class MetricFamilyBase {
 public:
  virtual ~MetricFamilyBase() = default;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  virtual MetricType type() const = 0;
  /// @brief Appends `# HELP`, `# TYPE` and one sample line per child (per bucket for a histogram).
  void render_to(std::string& out) const;

 protected:
  MetricFamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  /// @brief Appends the samples of every child, children in label-value order.
  virtual void render_samples(std::string& out) const = 0;
  void check_arity(size_t n) const;

 private:
  std::string name_, help_;
  std::vector<std::string> label_names_;
};

class MetricsRegistry;

namespace detail {
// Only the registry makes families (it validates their names).
class RegistryKey {
  friend class th::http::MetricsRegistry;
  RegistryKey() = default;
};

// Orders children by their label values and finds them by string_views without building a key.
struct LabelValuesLess {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                        [](std::string_view x, std::string_view y) { return x < y; });
  }
};
}  // namespace detail

/// @brief One family: children of type M (Counter, Gauge, Histogram), one per label-value tuple.
template <class M>
class MetricFamily final : public MetricFamilyBase {
 public:
  /// @brief The child for these label values (in the order of the label names), created on first
  /// use. The reference stays valid as long as the registry. Throws std::invalid_argument when
  /// the number of values is not the number of label names.
  M& with(std::initializer_list<std::string_view> values = {}) {
    return with(std::span<const std::string_view>(values.begin(), values.size()));
  }
  M& with(std::span<const std::string_view> values);
  MetricType type() const override {
    if constexpr (std::is_same_v<M, Counter>) return MetricType::Counter;
    else if constexpr (std::is_same_v<M, Gauge>) return MetricType::Gauge;
    else return MetricType::Histogram;
  }

  MetricFamily(detail::RegistryKey, std::string name, std::string help, std::vector<std::string> label_names,
               std::vector<double> bounds)
      : MetricFamilyBase(std::move(name), std::move(help), std::move(label_names)), bounds_(std::move(bounds)) {}

 private:
  void render_samples(std::string& out) const override;

  const std::vector<double> bounds_;  // histograms only
  mutable std::shared_mutex m_;
  std::map<std::vector<std::string>, std::unique_ptr<M>, detail::LabelValuesLess> children_;
};

extern template class MetricFamily<Counter>;
extern template class MetricFamily<Gauge>;
extern template class MetricFamily<Histogram>;
using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

/// @brief Owns metric families and renders them, in registration order.
class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  /// @brief Registers a family. A family without labels gets its one child at once, so it renders
  /// as 0 before anything is recorded. Throws std::invalid_argument on a bad or repeated name.
  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> label_names = {});
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> label_names = {});
  /// @brief `bounds`: the buckets' upper bounds, finite and strictly increasing (a trailing +Inf
  /// is allowed and dropped: the +Inf bucket is always there).
  HistogramFamily& histogram(std::string name, std::string help, std::vector<double> bounds,
                             std::vector<std::string> label_names = {});

  /// @brief The text exposition format 0.0.4 (Content-Type: text/plain; version=0.0.4).
  std::string render() const;
  void render_to(std::string& out) const;

 private:
  template <class M>
  MetricFamily<M>& add(std::string name, std::string help, std::vector<std::string> label_names,
                       std::vector<double> bounds);

  mutable std::mutex m_;
  std::vector<std::unique_ptr<MetricFamilyBase>> families_;
};

/// @brief The Content-Type of `render()`'s output.
inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// --- Exposed for tests
/// @brief Appends a sample value: integers (up to 2^53) as integers, other finite values in the
/// shortest form that reads back as the same double, then +Inf, -Inf, NaN.
void append_metric_value(std::string& out, double v);
/// @brief HELP text escaping: `\` -> `\\`, newline -> `\n`.
void append_escaped_help(std::string& out, std::string_view s);
/// @brief Label value escaping: `\` -> `\\`, `"` -> `\"`, newline -> `\n`.
void append_escaped_label_value(std::string& out, std::string_view s);
bool is_valid_metric_name(std::string_view name);
bool is_valid_label_name(std::string_view name);

}  // namespace th::http
