#pragma once
#include "core/registry.hpp"
namespace hcq::nv {
DriverFactory factory();
}
