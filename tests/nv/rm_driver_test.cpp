// The NVIDIA driver against the emulated RM/UVM where the shared device suite does not reach:
// the RM version it meets, the older layouts it speaks, RM's errors, and cubins that do not
// fit the device.
#include "nv/rm_driver.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>

#include "core/hcq.hpp"
#include "kernels.hpp"
#include "nv/emu/rm.hpp"
#include "nv/rm_abi.hpp"
#include "nv/rm_channel.hpp"
#include "nv/rm_device.hpp"
#include "nv/targets.hpp"

namespace hcq::nv {
namespace {

std::unique_ptr<Device> open_emulated(const std::string& target, const std::string& version) {
  const Target* t = find_target(target);
  EXPECT_NE(t, nullptr);
  return std::make_unique<Device>(
      open_rm_device(emu::make_emulated_system(*t, version), 0, "emu:" + target),
      Device::Options{});
}

TEST(NvDriver, AnRmVersionItDoesNotSpeakIsAClearErrorNamingBoth) {
  try {
    open_emulated("sm_90", "470.57.02");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "emu:sm_90: the NVIDIA kernel module's RM interface is version 470.57.02; "
                 "hcq's structures are written for 595.45.04 and match versions 580 to 595.x");
  }
  EXPECT_THROW(open_emulated("sm_90", "600.1"), Error);
}

// 580 and 590 differ from 595 in the name-string control and the UVM_FREE and
// UVM_UNREGISTER_CHANNEL layouts; the emulated module checks the ones its version has.
TEST(NvDriver, OlderModulesGetTheirOwnLayouts) {
  kernels::register_cpu_implementations();
  for (const char* version : {"580.95.05", "590.48.01", "595.45.04"}) {
    SCOPED_TRACE(version);
    auto dev = open_emulated("sm_90", version);
    EXPECT_EQ(dev->properties().description,
              "NVIDIA H100 80GB HBM3 (emulated) (sm_90, RM " + std::string(version) + ")");
    std::vector<uint32_t> in(1 << 16), out(in.size());
    std::iota(in.begin(), in.end(), 5u);
    for (int round = 0; round < 3; round++) {
      Buffer b = dev->allocate(in.size() * 4);
      dev->copy_in(b, 0, in.data(), in.size() * 4);
      dev->copy_out(out.data(), b, 0, out.size() * 4);
      ASSERT_EQ(out, in);
    }
    // Host memory mapped, unmapped and mapped again at the same address: UVM_FREE must free
    // the range (a cached device buffer never reaches it).
    void* host = std::aligned_alloc(4096, 8192);
    for (int round = 0; round < 3; round++) {
      Buffer m = dev->map_host(host, 8192);
      dev->copy_in(m, 0, in.data(), 8192);
      dev->synchronize();
      ASSERT_EQ(std::memcmp(host, in.data(), 8192), 0);
    }
    std::free(host);
    auto image = kernels::code_object("sm_90");
    if (image.empty()) continue;
    Buffer b = dev->allocate(4096);
    Program fill(*dev, image, "fill_u32");
    fill.launch(KernelArgs().buffer(b).value(9u).value(1024u).value(256u), {4, 1, 1},
                {256, 1, 1}, true);
    dev->copy_out(out.data(), b, 0, 4096);
    EXPECT_EQ(std::count(out.begin(), out.begin() + 1024, 9u), 1024);
  }
}

// Compute units are the SMs the product runs (enabled TPCs from RM's GPC and TPC masks), not
// the die's layout: an H200 (a GH100 die of 144) runs 132.
TEST(NvDriver, ComputeUnitsAreTheEnabledSms) {
  for (auto [target, sms] : {std::pair{"sm_80", 108u}, {"sm_90", 132u}, {"sm_100", 148u}}) {
    SCOPED_TRACE(target);
    EXPECT_EQ(Device::open(std::string("emu:") + target)->properties().compute_units, sms);
  }
}

TEST(NvDriver, RmErrorsNameTheObjectAndTheStatus) {
  auto dev = Device::open("emu:sm_80");  // 80 GiB of video memory
  if (dev->driver().va_size() < (100ull << 30))
    GTEST_SKIP() << "the GPU address range is smaller than the request here (under "
                    "AddressSanitizer the driver reserves a small range below 2 GiB)";
  try {
    dev->allocate(100ull << 30);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    // What is free comes from FB_GET_INFO_V2's HEAP_FREE, in KiB.
    EXPECT_STREQ(e.what(), "emu:sm_80: allocating the 107374182400 bytes of device memory "
                           "(class 0x40): NV_ERR_NO_MEMORY; free: 85899309056 bytes of "
                           "85899345920 bytes");
  }
  Buffer b = dev->allocate(4096);  // the device is still usable
  EXPECT_NE(b.va(), 0u);
}

// A command buffer runs as one GPFIFO entry, whose LENGTH is 21 bits of dwords: one past it is
// refused before anything is written. A direct submission is copied into the channel's push
// ring and may take half of it (1 MiB ring).
TEST(NvDriver, EntryAndPushRingLimitsAreExact) {
  auto drv = open_rm_device(emu::make_emulated_system(*find_target("sm_90")), 0, "emu:sm_90");
  auto q = drv->create_queue(QueueKind::Compute);
  const uint32_t max_entry = (1u << 21) - 1;
  const Allocation nops = drv->allocate(drv->va_base(), uint64_t(max_entry + 1) * 4,
                                        MemoryKind::Host, false);
  std::memset(nops.host, 0, nops.size);  // zero words: NOPs
  try {
    q->submit_indirect(nops.va, max_entry + 1);
    FAIL() << "expected an error";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "emu:sm_90: compute channel 0: GPFIFO entry.LENGTH: 2097152 does not "
                           "fit in 21 bits (at most 2097151)");
  }
  EXPECT_NO_THROW(q->submit_indirect(nops.va, max_entry));
  const size_t max_direct = (1u << 20) / 2 / 4;
  const auto* words = static_cast<const uint32_t*>(nops.host);
  EXPECT_NO_THROW(q->submit(words, max_direct));
  try {
    q->submit(words, max_direct + 1);
    FAIL() << "expected an error";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "emu:sm_90: compute channel 0: a submission of 524292 bytes does not "
                           "fit the push buffer (524288 at most); bind it instead");
  }
  q.reset();
  drv->free(nops);
}

TEST(NvDriver, CubinsForAnotherDeviceOrDamagedAreRejected) {
  auto dev = Device::open("emu:sm_90");
  auto other = kernels::code_object("sm_80");
  if (!other.empty()) {
    try {
      Program p(*dev, other, "fill_u32");
      FAIL() << "expected an error";
    } catch (const InvalidInput& e) {
      EXPECT_STREQ(e.what(), "emu:sm_90: cubin is built for sm_80, the device is sm_90");
    }
  }
  auto image = kernels::code_object("sm_90");
  if (image.empty()) GTEST_SKIP() << "no sm_90 cubin (nvcc was not found at build time)";
  EXPECT_THROW(Program(*dev, image.first(100), "fill_u32"), InvalidInput);
  try {
    Program p(*dev, image, "no_such_kernel");
    FAIL() << "expected an error";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "code object has no kernel 'no_such_kernel' (it has: copy_bytes, empty, "
                           "fill_u32, scale_add, spin_until, vector_add)");
  }
}

// Launches recorded back to back run in order as a dependent-QMD chain (V03: Ampere, Ada),
// also after the second is patched; V04 and V05 targets launch each on its own.
TEST(NvDriver, ChainedLaunchesRunInOrder) {
  kernels::register_cpu_implementations();
  for (const char* target : {"sm_80", "sm_90", "sm_100"}) {
    SCOPED_TRACE(target);
    auto dev = Device::open(std::string("emu:") + target);
    auto image = kernels::code_object(target);
    if (image.empty()) continue;
    Program fill(*dev, image, "fill_u32");
    const uint32_t n = 4096, block = 128;
    Buffer b = dev->allocate(n * 4);
    Buffer args = dev->allocate(8192, MemoryKind::Host);
    auto* a = static_cast<std::byte*>(args.host());
    fill.fill_args(KernelArgs().buffer(b).value(1u).value(n).value(block), a);
    fill.fill_args(KernelArgs().buffer(b).value(2u).value(n).value(block), a + 4096);
    Signal s = dev->new_signal();
    ComputeQueue q(*dev);
    q.exec(fill, args.va(), {n / block, 1, 1}, {block, 1, 1});
    q.memory_barrier();
    q.exec(fill, args.va() + 4096, {n / block, 1, 1}, {block, 1, 1});  // must run second
    q.signal(s, 1);
    q.bind();
    q.submit();
    s.wait(1);
    std::vector<uint32_t> out(n);
    dev->copy_out(out.data(), b, 0, n * 4);
    EXPECT_EQ(std::count(out.begin(), out.end(), 2u), n);
    const uint32_t pcas = 0x200120ad;  // SEND_PCAS_A on subchannel 1
    const auto& cs = q.stream();
    EXPECT_EQ(std::count(cs.data(), cs.data() + cs.size(), pcas),
              std::string(target) == "sm_80" ? 1 : 2);
    q.update_exec(2, std::nullopt, Dim3{n / block / 2, 1, 1}, std::nullopt);  // half the grid
    q.update_signal(3, std::nullopt, 2);
    std::fill(out.begin(), out.end(), 0u);
    dev->copy_in(b, 0, out.data(), n * 4);
    dev->synchronize();  // the recording does not wait on the device timeline
    q.submit();
    s.wait(2);
    dev->copy_out(out.data(), b, 0, n * 4);
    EXPECT_EQ(std::count(out.begin(), out.end(), 2u), n / 2);
    EXPECT_EQ(std::count(out.begin(), out.end(), 1u), n / 2);
  }
}

TEST(NvDriver, ClassesAreTheNewestTheGpuLists) {
  const uint32_t listed[] = {rm::AMPERE_DMA_COPY_A, rm::AMPERE_DMA_COPY_B, rm::AMPERE_COMPUTE_B,
                             rm::ADA_COMPUTE_A,     rm::AMPERE_CHANNEL_GPFIFO_A,
                             rm::TURING_USERMODE_A, rm::HOPPER_USERMODE_A};
  ClassSet c = pick_classes(listed);
  EXPECT_EQ(c.compute, rm::ADA_COMPUTE_A);
  EXPECT_EQ(c.copy, rm::AMPERE_DMA_COPY_B);
  EXPECT_EQ(c.gpfifo, rm::AMPERE_CHANNEL_GPFIFO_A);
  EXPECT_EQ(c.usermode, rm::HOPPER_USERMODE_A);
  EXPECT_EQ(gen_of_compute_class(rm::ADA_COMPUTE_A), Gen::Ada);
  EXPECT_EQ(qmd_version_for(Gen::Hopper), QmdVersion::V04);  // what an H200 runs
  EXPECT_EQ(qmd_version_for(Gen::Blackwell), QmdVersion::V05);
  const uint32_t none[] = {rm::FERMI_VASPACE_A};
  EXPECT_EQ(pick_classes(none).compute, 0u);
}

TEST(NvDriver, ConstantBankZeroDriverWordsFollowTheGeneration) {
  // Shared window, local window and the stack top: dwords 6..11 before Blackwell, 188..191
  // and 223 on Blackwell (tinygrad ops_nv.py).
  auto words = [](Gen g) {
    auto b = cbuf0_driver_words(g, 0xfe000000, 0xff000000);
    std::vector<uint32_t> w(b.size() / 4);
    std::memcpy(w.data(), b.data(), b.size());
    return w;
  };
  auto hopper = words(Gen::Hopper);
  ASSERT_EQ(hopper.size(), 12u);
  EXPECT_EQ(std::vector<uint32_t>(hopper.begin() + 6, hopper.end()),
            (std::vector<uint32_t>{0xfe000000, 0, 0xff000000, 0, 0xfffdc0, 0}));
  auto blackwell = words(Gen::Blackwell);
  ASSERT_EQ(blackwell.size(), 224u);
  EXPECT_EQ(blackwell[188], 0xfe000000u);
  EXPECT_EQ(blackwell[190], 0xff000000u);
  EXPECT_EQ(blackwell[223], 0xfffdc0u);
  EXPECT_EQ(blackwell[6], 0u);
}

// Sets an environment variable for the scope and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(NvDriver, SwitchesComeFromTheEnvironmentAtOpen) {
  ScopedEnv host("HCQ_NV_GPFIFO_HOST", "1"), qmd("HCQ_NV_QMD_BY_ADDRESS", nullptr);
  NvOptions o = NvOptions::from_environment();
  EXPECT_TRUE(o.gpfifo_host);
  EXPECT_FALSE(o.qmd_by_address);
  EXPECT_EQ(o.text(), "gpfifo_host");
  EXPECT_EQ(NvOptions{}.text(), "");
  EXPECT_EQ((NvOptions{true, true}).text(), "gpfifo_host,qmd_by_address");
  // The description names the switches on, so every figure says which path it took.
  EXPECT_EQ(open_emulated("sm_90", "595.45.04")->properties().description,
            "NVIDIA H100 80GB HBM3 (emulated) (sm_90, RM 595.45.04) [gpfifo_host]");
  {
    ScopedEnv off("HCQ_NV_GPFIFO_HOST", "0");
    EXPECT_FALSE(NvOptions::from_environment().gpfifo_host);
  }
  ScopedEnv bad("HCQ_NV_QMD_BY_ADDRESS", "yes");
  try {
    open_emulated("sm_90", "595.45.04");
    FAIL() << "expected an error";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "HCQ_NV_QMD_BY_ADDRESS='yes': expected 0 or 1");
  }
}

// Each switch alone and both: the ring where the switch puts it, and launches and copies on
// both channels running in the order submitted (V03 on sm_80, V04 on sm_90).
TEST(NvDriver, EachSwitchRunsLaunchesAndCopiesInOrder) {
  kernels::register_cpu_implementations();
  for (const char* target : {"sm_80", "sm_90"}) {
    auto image = kernels::code_object(target);
    if (image.empty()) continue;
    for (NvOptions o : {NvOptions{}, NvOptions{true, false}, NvOptions{false, true},
                        NvOptions{true, true}}) {
      SCOPED_TRACE(std::string(target) + " [" + o.text() + "]");
      auto driver = open_rm_device(emu::make_emulated_system(*find_target(target)), 0,
                                   std::string("emu:") + target, o);
      auto* rm = static_cast<RmDriver*>(driver.get());
      EXPECT_EQ(rm->options().text(), o.text());
      auto extra = rm->create_queue(QueueKind::Copy);
      EXPECT_EQ(static_cast<GpfifoChannel&>(*extra).ring_in_host_memory(), o.gpfifo_host);
      extra.reset();
      Device dev(std::move(driver), Device::Options{});
      const uint32_t n = 4096, block = 256;
      Buffer a = dev.allocate(n * 4), b = dev.allocate(n * 4);
      Program fill(dev, image, "fill_u32");
      // Each launch overwrites the last, each copy carries the launch's value on: only the
      // order submitted leaves 20 in both.
      for (uint32_t v = 1; v <= 20; v++) {
        fill.launch(KernelArgs().buffer(a).value(v).value(n).value(block), {n / block, 1, 1},
                    {block, 1, 1});
        dev.copy(b, 0, a, 0, n * 4);
      }
      std::vector<uint32_t> out(n);
      dev.copy_out(out.data(), b, 0, n * 4);
      EXPECT_EQ(std::count(out.begin(), out.end(), 20u), n);
      dev.copy_out(out.data(), a, 0, n * 4);
      EXPECT_EQ(std::count(out.begin(), out.end(), 20u), n);
    }
  }
}

}  // namespace
}  // namespace hcq::nv
