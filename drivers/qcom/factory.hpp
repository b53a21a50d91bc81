#pragma once
#include "core/registry.hpp"
namespace hcq::qcom {
DriverFactory factory();
}
