// Every driver built into libhcq. lib/core finds drivers only through this list.
#include "amd/factory.hpp"
#include "nv/factory.hpp"
#include "qcom/factory.hpp"
#include "core/registry.hpp"

namespace hcq {

const std::vector<DriverFactory>& builtin_drivers() {
  static const std::vector<DriverFactory> drivers = {amd::factory(), nv::factory(), qcom::factory()};
  return drivers;
}

}  // namespace hcq
