// Everything a user of the core library needs.
#pragma once

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/program.hpp"
#include "core/queue.hpp"
