#include "cli/compute_types.h"

#include <chrono>
#include <cstdio>
#include <string>

namespace th::cli {

Status load_compute_types(LlamaModel& model, const std::vector<ComputeType>& types, std::string_view verb,
                          bool keep_going, const std::function<void(ComputeType, size_t)>& on_loaded) {
  const std::string v(verb);
  auto report = [&](ComputeType t, double seconds) {
    const size_t bytes = model.weight_bytes(t);
    const bool shared = t != ComputeType::Native && model.weight_set(t) == 0;
    std::fprintf(stderr, "tokenhive %s: compute type %s: %.1f MiB of weights%s\n", v.c_str(),
                 std::string(compute_type_name(t)).c_str(), static_cast<double>(bytes) / (1 << 20),
                 t == ComputeType::Native ? " (the file's own)"
                 : shared                 ? " (the file's own: already that type, no copy)"
                                          : (", converted in " + std::to_string(seconds).substr(0, 5) + " s").c_str());
    if (on_loaded) on_loaded(t, bytes);
  };
  report(ComputeType::Native, 0);
  for (ComputeType t : types) {
    if (t == ComputeType::Native || t == ComputeType::Auto || model.has_compute_type(t)) continue;
    const auto start = std::chrono::steady_clock::now();
    if (Status s = model.add_compute_type(t); !s.ok()) {
      if (!keep_going) return s;
      std::fprintf(stderr, "tokenhive %s: compute type %s not loaded: %s\n", v.c_str(),
                   std::string(compute_type_name(t)).c_str(), s.message().c_str());
      continue;
    }
    report(t, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (const std::string note = model.weight_note(t); !note.empty())
      std::fprintf(stderr, "tokenhive %s: compute type %s: %s\n", v.c_str(), std::string(compute_type_name(t)).c_str(),
                   note.c_str());
  }
  return ok_status();
}

}  // namespace th::cli
