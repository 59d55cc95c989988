#include "base/cpu_set.h"

#include <pthread.h>
#include <sched.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace th {

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

int allowed_physical_cores() {
  const std::vector<int> cpus = allowed_cpus();
  std::set<std::pair<int, int>> cores;  // (package, core)
  for (int c : cpus) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    int package = -1, core = -1;
    std::ifstream(dir + "physical_package_id") >> package;
    std::ifstream(dir + "core_id") >> core;
    if (package < 0 || core < 0) return static_cast<int>(cpus.size());
    cores.insert({package, core});
  }
  return static_cast<int>(cores.size());
}

}  // namespace th
