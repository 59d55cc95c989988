#include "cluster/cell_load.h"

#include <nlohmann/json.hpp>

#include "cluster/bounded_json.h"

namespace th::cluster {

namespace {

using json = nlohmann::json;

int64_t int_or(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  // An integer only: a float out of int64_t's range would be undefined to convert.
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

}  // namespace

Result<CellLoad> parse_cell_load(std::string_view body) {
  TH_ASSIGN_OR_RETURN(json j, parse_json_bounded(body, kControlLimits));
  if (!j.is_object()) return Status::error("a heartbeat that is not a JSON object");
  CellLoad load;
  load.running = int_or(j, "running", 0);
  load.waiting = int_or(j, "waiting", 0);
  load.kv_free_blocks = int_or(j, "kv_free_blocks", 0);
  load.kv_total_blocks = int_or(j, "kv_total_blocks", 0);
  auto tps = j.find("tokens_per_second");
  load.tokens_per_second = tps != j.end() && tps->is_number() ? tps->get<double>() : 0.0;
  auto ready = j.find("ready");
  load.draining = !(ready != j.end() && ready->is_boolean() && ready->get<bool>());
  return load;
}

}  // namespace th::cluster
