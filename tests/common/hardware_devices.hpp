// Real devices to test and benchmark on, named in an environment variable
// (HCQ_TEST_DEVICES=nv:0,amd:0 for the suites, HCQ_BENCH_DEVICES for the benchmarks). CI
// machines have no GPU and leave them unset: the suites then run on emulated targets only.
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace hcq::testing_support {

inline std::vector<std::string> devices_from_env(const char* variable) {
  std::vector<std::string> names;
  const char* list = std::getenv(variable);
  std::istringstream in(list ? list : "");
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) names.push_back(name);
  return names;
}

// A suite parameter is an emulated target ("gfx1100") or a real device's name ("nv:0").
inline std::string device_name(const std::string& param) {
  return param.find(':') == std::string::npos ? "emu:" + param : param;
}

// GoogleTest names allow letters, digits and '_' only: "nv:0" becomes "nv_0".
inline std::string test_name(std::string param) {
  for (char& c : param)
    if (c == ':') c = '_';
  return param;
}

}  // namespace hcq::testing_support
