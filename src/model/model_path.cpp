#include "model/model_path.h"

#include <cstdlib>
#include <filesystem>

namespace th {

Result<std::string> resolve_model_path(const std::string& flag) {
  namespace fs = std::filesystem;
  if (!flag.empty()) {
    if (!fs::exists(flag)) return Status::errorf("model file '", flag, "' does not exist");
    return flag;
  }
  if (const char* env = std::getenv("TOKENHIVE_MODEL"); env && *env) {
    if (!fs::exists(env)) return Status::errorf("$TOKENHIVE_MODEL names '", env, "', which does not exist");
    return std::string(env);
  }
  const std::string def = "models/default.gguf";
  if (fs::exists(def)) return def;
  return Status::errorf("no model: give -m MODEL, set $TOKENHIVE_MODEL, or run scripts/setup.sh to fetch ", def);
}

std::string find_shared_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("TOKENHIVE_SHARED"); env && *env) return env;
  for (const char* c : {"../shared", "../../shared"})
    if (fs::is_directory(c)) return c;
  return "";
}

}  // namespace th
