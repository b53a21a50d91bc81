#pragma once
#include "core/registry.hpp"
namespace hcq::amd {
DriverFactory factory();
}
