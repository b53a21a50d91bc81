// The NVIDIA driver over the open kernel module's RM and UVM interfaces: the object tree of
// one GPU, memory allocated through RM and mapped at the same address for CPU and GPU through
// UVM, GPFIFO channels written directly (entries, GP_PUT in USERD, the usermode doorbell),
// cubins loaded and launched with hand-built QMDs. Everything goes through the kernel
// boundary, so the same code drives /dev/nvidiactl on a real GPU and the emulated RM.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/driver.hpp"
#include "nv/options.hpp"
#include "os/kernel.hpp"

namespace hcq {
class Device;
}

namespace hcq::nv {

// Opens the `index`-th GPU RM reports; `device_name` is the name it reports ("nv:0",
// "emu:sm_90"). `options`: the submission switches (nv/options.hpp), by default as the
// environment sets them when the device opens.
std::unique_ptr<DeviceDriver> open_rm_device(
    std::shared_ptr<os::Kernel> kernel, int index, const std::string& device_name,
    const NvOptions& options = NvOptions::from_environment());

// GPUs RM reports on this machine (NV_ESC_CARD_INFO): one line each; empty without the module.
std::vector<std::string> rm_gpus(os::Kernel& kernel);

// The RM versions whose interface hcq speaks (nv/rm_abi.hpp has each layout that changed in
// between); RM's version is checked at open.
inline constexpr unsigned kMinRmMajor = 580, kMaxRmMajor = 595;

}  // namespace hcq::nv
