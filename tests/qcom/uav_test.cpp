// UAVs on every emulated Adreno (KGSL and msm DRM, a6xx and a7xx): vector_add_uav, whose CPU
// implementation reads and writes only through the buffers the emulated GPU decodes from the
// loaded UAV descriptors, gives verified sums; a recorded launch given another argument block,
// an argument block whose address word is rewritten, and a batch run with a re-bound input each
// move the output to the new buffer and leave the old one alone; CP_MEM_TO_MEM, which copies the
// addresses, sums signed 32- and 64-bit sources; an unaligned or unmapped UAV
// buffer, a descriptor of another type, format or tiling, and SP_CS_IBO / SP_CS_IBO_COUNT
// disagreeing with the loaded descriptors fault the queue saying which; a version-1
// container's UAV kernel is refused with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "batch/batch.hpp"
#include "core/error.hpp"
#include "core/program.hpp"
#include "core/queue.hpp"
#include "kernels.hpp"
#include "qcom/encoders.hpp"
#include "qcom/ir3_program.hpp"

namespace hcq::qcom {
namespace {

constexpr uint32_t kN = 1000, kBlock = 64;
constexpr Dim3 kGrid{(kN + kBlock - 1) / kBlock, 1, 1}, kWorkgroup{kBlock, 1, 1};

class Uav : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kernels::register_cpu_implementations();
    dev_ = Device::open("emu:" + GetParam());
    img_ = load_program(*dev_, kernels::code_object(dev_->properties().arch));
    a_.resize(kN);
    b_.resize(kN);
    for (uint32_t i = 0; i < kN; i++) a_[i] = float(i) * 0.5f, b_[i] = float(7 * i + 3);
    A_ = dev_->allocate(kN * 4);
    B_ = dev_->allocate(kN * 4);
    dev_->copy_in(A_, 0, a_.data(), kN * 4);
    dev_->copy_in(B_, 0, b_.data(), kN * 4);
  }
  Program program() { return Program(*dev_, img_, "vector_add_uav"); }
  KernelArgs args(const Buffer& c, uint64_t c_offset = 0) {
    return KernelArgs().buffer(A_).buffer(B_).buffer(c, c_offset).value(kN).value(kBlock);
  }
  std::vector<float> read(const Buffer& c) {
    std::vector<float> out(kN);
    dev_->copy_out(out.data(), c, 0, kN * 4);
    return out;
  }
  void expect_sums(const Buffer& c) {
    const auto out = read(c);
    for (uint32_t i = 0; i < kN; i++) ASSERT_EQ(out[i], a_[i] + b_[i]) << i;
  }
  void expect_untouched(const Buffer& c) {
    const auto out = read(c);
    for (uint32_t i = 0; i < kN; i++) ASSERT_EQ(out[i], 0.0f) << i;
  }
  // Runs a launch of vector_add_uav with `c` (at `c_offset`) and returns the GPU fault it raises.
  std::string fault_of(const Buffer& c, uint64_t c_offset) {
    try {
      program().launch(args(c, c_offset), kGrid, kWorkgroup, true, std::chrono::milliseconds(5000));
    } catch (const GpuFaultError& e) {
      return e.what();
    }
    return "(no fault)";
  }
  std::unique_ptr<Device> dev_;
  std::shared_ptr<const ProgramImage> img_;
  std::vector<float> a_, b_;
  Buffer A_, B_;
};

TEST_P(Uav, KernelReachesItsBuffersThroughTheDescriptors) {
  Program add = program();
  EXPECT_EQ(add.kernarg_size(), 64u + 3 * 64);  // the argument block, then three descriptors
  Buffer C = dev_->allocate(kN * 4);
  add.launch(args(C), kGrid, kWorkgroup, true);
  expect_sums(C);
}

TEST_P(Uav, ARecordedLaunchFollowsItsArguments) {
  Program add = program();
  Buffer C1 = dev_->allocate(kN * 4), C2 = dev_->allocate(kN * 4), C3 = dev_->allocate(kN * 4);
  Buffer k1 = dev_->allocate(add.kernarg_size(), MemoryKind::Host);
  Buffer k2 = dev_->allocate(add.kernarg_size(), MemoryKind::Host);
  add.fill_args(args(C1), k1.host());
  add.fill_args(args(C2), k2.host());
  Signal s = dev_->new_signal();
  ComputeQueue q(*dev_);
  q.memory_barrier().exec(add, k1.va(), kGrid, kWorkgroup).signal(s, 1);
  q.bind();
  q.submit();
  s.wait(1);
  expect_sums(C1);
  expect_untouched(C2);

  // Another argument block: the descriptors are rebuilt from it.
  q.update_exec(1, k2.va(), std::nullopt, std::nullopt);
  q.update_signal(2, std::nullopt, 2);
  q.submit();
  s.wait(2);
  expect_sums(C2);

  // The same block with c's address rewritten (what a batch re-binding does): the launch copies
  // the new address into the descriptor.
  const uint64_t c3 = C3.va();
  std::memcpy(static_cast<std::byte*>(k2.host()) + 16, &c3, 8);  // argument c at offset 16
  q.update_signal(2, std::nullopt, 3);
  q.submit();
  s.wait(3);
  expect_sums(C3);
}

TEST_P(Uav, ABatchRebindingMovesTheOutput) {
  Program add = program();
  batch::Schedule s(*dev_);
  batch::Mem c = s.input(kN * 4);
  s.launch(add, kGrid, kWorkgroup,
           {batch::Arg::buffer(batch::Mem::of(A_)), batch::Arg::buffer(batch::Mem::of(B_)),
            batch::Arg::buffer(c), batch::Arg::value(kN), batch::Arg::value(kBlock)});
  batch::Executable exe = s.compile();
  Buffer C1 = dev_->allocate(kN * 4), C2 = dev_->allocate(kN * 4);
  dev_->timeline().wait(exe.run(batch::Bindings().input(c, C1)));
  expect_sums(C1);
  expect_untouched(C2);
  dev_->timeline().wait(exe.run(batch::Bindings().input(c, C2)));
  expect_sums(C2);
}

TEST_P(Uav, AnUnalignedBufferFaultsWithTheDescriptor) {
  Buffer C = dev_->allocate(kN * 4 + 64);
  const std::string msg = fault_of(C, 4);
  EXPECT_NE(msg.find("CP_EXEC_CS: UAV 2 descriptor at "), std::string::npos) << msg;
  EXPECT_NE(msg.find(": base address " + hex(C.va() + 4) + " is not 64-byte aligned"),
            std::string::npos)
      << msg;
}

TEST_P(Uav, AnUnmappedBufferFaultsWithTheDescriptor) {
  constexpr uint64_t gone = 0x40;  // 64-byte aligned, below every mapping
  try {
    program().launch(KernelArgs().buffer(A_).buffer(B_).address(gone).value(kN).value(kBlock),
                     kGrid, kWorkgroup, true, std::chrono::milliseconds(5000));
    FAIL() << "expected a fault";
  } catch (const GpuFaultError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("UAV 2 descriptor at "), std::string::npos) << msg;
    EXPECT_NE(msg.find(": buffer address " + hex(gone) + " is not mapped"), std::string::npos)
        << msg;
  }
}

// The launch vector_add_uav encodes, submitted straight to the ring after `edit` changed its
// words or its kernarg area at `va` (descriptors at byte 64, 16 dwords each); returns the
// fault's CP_EXEC_CS line.
template <class Edit>
std::string fault_after(Device& dev, const Program& add, const Buffer& A, const Buffer& B,
                        Edit edit) {
  Buffer C = dev.allocate(kN * 4);
  Buffer area = dev.allocate(add.kernarg_size(), MemoryKind::Host);
  add.fill_args(KernelArgs().buffer(A).buffer(B).buffer(C).value(kN).value(kBlock), area.host());
  CommandStream cs;
  std::vector<PatchSite> sites;
  dev.encoder(QueueKind::Compute).exec(cs, add.kernel(), area.va(), kGrid, kWorkgroup, sites);
  std::vector<uint32_t> w(cs.data(), cs.data() + cs.size());
  edit(w, static_cast<uint32_t*>(area.host()), area.va());
  Signal s = dev.new_signal();
  try {
    dev.hw_queue(QueueKind::Compute).submit(w.data(), w.size());
    ComputeQueue q(dev);
    q.signal(s, 1);
    q.submit();
    s.wait(1, std::chrono::milliseconds(5000));
  } catch (const GpuFaultError& e) {
    const std::string msg = e.what();
    const size_t at = msg.find("CP_EXEC_CS: ");
    return at == std::string::npos ? msg : msg.substr(at, msg.find('\n', at) - at);
  }
  return "(no fault)";
}

// Replaces the dwords `from` with `to` in `w` (the first place they are).
void replace(std::vector<uint32_t>& w, const std::vector<uint32_t>& from,
             const std::vector<uint32_t>& to) {
  auto it = std::search(w.begin(), w.end(), from.begin(), from.end());
  ASSERT_NE(it, w.end());
  std::copy(to.begin(), to.end(), it);
}

TEST_P(Uav, BadUavStateFaultsTheQueueWithWhatIsWrong) {
  using Words = std::vector<uint32_t>;
  // Each case on a new device: a faulted context takes no more work.
  auto check = [&](auto edit, auto expected) {
    A_ = Buffer();  // what the old device holds goes before it
    B_ = Buffer();
    img_.reset();
    dev_ = Device::open("emu:" + GetParam());
    img_ = load_program(*dev_, kernels::code_object(dev_->properties().arch));
    A_ = dev_->allocate(kN * 4);
    B_ = dev_->allocate(kN * 4);
    uint64_t va = 0;
    const std::string got = fault_after(*dev_, program(), A_, B_, [&](Words& w, uint32_t* area, uint64_t at) {
      va = at;
      edit(w, area, at);
    });
    EXPECT_EQ(got, expected(va));
  };
  // UAV 1's dword 2 with TYPE A6XX_TEX_2D (1 << 29) instead of A6XX_TEX_BUFFER.
  check([](Words&, uint32_t* area, uint64_t) { area[(64 + 64) / 4 + 2] = 0x20000010; },
        [](uint64_t va) {
          return "CP_EXEC_CS: UAV 1 descriptor at " + hex(va + 128) +
                 ": TYPE 1 is not A6XX_TEX_BUFFER (the emulated GPU runs buffer UAVs)";
        });
  // UAV 0 as FMT6_32_FLOAT (0x4a << 22).
  check([](Words&, uint32_t* area, uint64_t) { area[64 / 4] = 0x4a << 22; },
        [](uint64_t va) {
          return "CP_EXEC_CS: UAV 0 descriptor at " + hex(va + 64) +
                 ": FMT 0x4a is not FMT6_8_UINT, FMT6_16_UINT or FMT6_32_UINT";
        });
  // UAV 0 tiled (TILE6_3).
  check([](Words&, uint32_t* area, uint64_t) { area[64 / 4] |= 3; },
        [](uint64_t va) {
          return "CP_EXEC_CS: UAV 0 descriptor at " + hex(va + 64) +
                 ": TILE_MODE 3 is not TILE6_LINEAR";
        });
  // SP_CS_IBO_COUNT (0x48aa0001) of 1 where SP_CS_CONFIG.NIBO is 3.
  check([](Words& w, uint32_t*, uint64_t) { replace(w, {0x48aa0001, 3}, {0x48aa0001, 1}); },
        [](uint64_t) { return std::string("CP_EXEC_CS: SP_CS_CONFIG.NIBO is 3, SP_CS_IBO_COUNT is 1"); });
  // SP_CS_CONFIG (0x48a9bb01) with ENABLED but NIBO 0.
  check([](Words& w, uint32_t*, uint64_t) { replace(w, {0x48a9bb01, 0xc00100}, {0x48a9bb01, 0x100}); },
        [](uint64_t) {
          return std::string("CP_EXEC_CS: kernel 'vector_add_uav' uses 3 UAVs, SP_CS_CONFIG.NIBO "
                             "gives it 0");
        });
  // The UAV load (ST6_UAV | SS6_INDIRECT | SB6_CS_SHADER | 3 << 22 = 0x00f6c000) of 2.
  check([](Words& w, uint32_t*, uint64_t) { replace(w, {0x70348003, 0x00f6c000}, {0x70348003, 0x00b6c000}); },
        [](uint64_t) {
          return std::string("CP_EXEC_CS: SP_CS_CONFIG.NIBO is 3, but CP_LOAD_STATE6 loaded 2 UAV "
                             "descriptors");
        });
  // SP_CS_IBO (0x40a9f202) 4 KiB past where the descriptors were loaded from.
  check(
      [](Words& w, uint32_t*, uint64_t va) {
        const uint64_t t = va + 64;
        replace(w, {0x40a9f202, uint32_t(t), uint32_t(t >> 32)},
                {0x40a9f202, uint32_t(t + 0x1000), uint32_t((t + 0x1000) >> 32)});
      },
      [](uint64_t va) {
        return "CP_EXEC_CS: SP_CS_IBO is " + hex(va + 64 + 0x1000) +
               ", but the UAV descriptors were loaded from " + hex(va + 64);
      });
}

// The emulated GPU reads the launch's sizes as the hardware does: SP_CS_INSTRLEN in 128-byte
// units (Mesa ir3_shader.h) and, on a7xx, HLSQ_CS_LAST_LOCAL_SIZE for the last workgroups
// (turnip tu_dispatch): a shader length in dwords, or a last-workgroup size left at zero,
// faults the queue saying which.
TEST_P(Uav, LaunchSizesAreCheckedInTheirUnits) {
  using Words = std::vector<uint32_t>;
  const uint64_t instr_dwords = static_cast<const AdrenoKernel&>(program().kernel()).instr_dwords;
  const uint32_t units = uint32_t((instr_dwords * 4 + 127) / 128);
  auto check = [&](const Words& from, const Words& to, const std::string& expected) {
    A_ = Buffer();  // a faulted context takes no more work: each case on a new device
    B_ = Buffer();
    img_.reset();
    dev_ = Device::open("emu:" + GetParam());
    img_ = load_program(*dev_, kernels::code_object(dev_->properties().arch));
    A_ = dev_->allocate(kN * 4);
    B_ = dev_->allocate(kN * 4);
    EXPECT_EQ(fault_after(*dev_, program(), A_, B_,
                          [&](Words& w, uint32_t*, uint64_t) { replace(w, from, to); }),
              expected);
  };
  // SP_CS_INSTRLEN (0x40a9bc01) in dwords.
  check({0x40a9bc01, units}, {0x40a9bc01, uint32_t(instr_dwords)},
        "CP_EXEC_CS: SP_CS_INSTRLEN is " + std::to_string(instr_dwords) +
            " (128-byte units); kernel 'vector_add_uav' has " + std::to_string(instr_dwords * 4) +
            " bytes of instructions, " + std::to_string(units) + " units");
  if (GetParam().starts_with("a7")) {
    // HLSQ_CS_LAST_LOCAL_SIZE (0x40a9df01) of 0 for 64x1x1 workgroups (63 << 2 = 0xfc).
    check({0x40a9df01, 0xfc}, {0x40a9df01, 0},
          "CP_EXEC_CS: HLSQ_CS_LAST_LOCAL_SIZE gives the last workgroup 1x1x1, the others are "
          "64x1x1 (the emulated GPU runs whole workgroups only)");
  }
}

// CP_MEM_TO_MEM, which the launches copy addresses with, sums its sources with their NEG_*
// signs: 32-bit *DST = *A - *B (NEG_B, bit 1), and 64-bit (DOUBLE, bit 29) *DST = -*A + *B
// (NEG_A, bit 0).
TEST_P(Uav, CpMemToMemSumsItsSignedSources) {
  Buffer m = dev_->allocate(4096, MemoryKind::Host);
  auto* w32 = static_cast<uint32_t*>(m.host());
  auto* w64 = static_cast<uint64_t*>(m.host());
  w32[2] = 10;                 // +8
  w32[4] = 3;                  // +16
  w64[5] = 5;                  // +40
  w64[6] = 0x100000000ull;     // +48
  const uint64_t va = m.va();
  auto lo = [](uint64_t v) { return uint32_t(v); };
  auto hi = [](uint64_t v) { return uint32_t(v >> 32); };
  // CP_MEM_TO_MEM (0x73: five ones, parity 0) of 7 (three ones, parity 0) = 0x70730007.
  const std::vector<uint32_t> words = {
      0x70730007, 0x2, lo(va), hi(va), lo(va + 8), hi(va + 8), lo(va + 16), hi(va + 16),
      0x70730007, 0x20000001, lo(va + 32), hi(va + 32), lo(va + 40), hi(va + 40), lo(va + 48),
      hi(va + 48)};
  dev_->hw_queue(QueueKind::Compute).submit(words.data(), words.size());
  Signal s = dev_->new_signal();
  ComputeQueue q(*dev_);
  q.signal(s, 1);
  q.submit();
  s.wait(1);
  EXPECT_EQ(__atomic_load_n(&w32[0], __ATOMIC_ACQUIRE), 7u);
  EXPECT_EQ(__atomic_load_n(&w64[4], __ATOMIC_ACQUIRE), 0xfffffffbull);
}

TEST_P(Uav, AVersion1KernelWithUavsIsRefusedWithTheReason) {
  Ir3Module m;
  Ir3Kernel k;
  k.name = "k";
  k.instructions = {0x00000000, 0x03000000};  // `end`
  k.const_dwords = 4;
  k.args_bytes = 16;
  k.uav_count = 2;
  k.args = {{"p", 0, 8, KernelArg::Kind::Buffer, KernelArg::Access::ReadWrite}};
  m.kernels.push_back(k);
  const auto file = write_ir3(m);
  std::shared_ptr<const ProgramImage> img = load_program(*dev_, file);
  try {
    Program(*dev_, img, "k");
    FAIL() << "launched UAVs bound to nothing";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(),
                 "kernel 'k' uses 2 UAVs that its version-1 ir3 container binds to no argument, "
                 "which hcq's Adreno launches do not provide yet");
  }
}

// KGSL and drm/msm run each submitted IB through a ring CP_INDIRECT_BUFFER whose IB_SIZE field
// holds 20 bits of dwords: an IB at the limit runs (type-2 filler, one dword each), one past it
// is refused with the field named, never submitted truncated.
TEST_P(Uav, AnIndirectBufferPastIbSizeIsRefused) {
  Buffer ib = dev_->allocate(uint64_t(qcom::kMaxIbDwords + 1) * 4, MemoryKind::Host);
  std::fill_n(static_cast<uint32_t*>(ib.host()), qcom::kMaxIbDwords + 1, qcom::kType2Filler);
  HwQueue& hw = dev_->hw_queue(QueueKind::Compute);
  hw.submit_indirect(ib.va(), qcom::kMaxIbDwords - 1);
  hw.submit_indirect(ib.va(), qcom::kMaxIbDwords);
  try {
    hw.submit_indirect(ib.va(), qcom::kMaxIbDwords + 1);
    FAIL() << "an IB of 2^20 dwords was submitted";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              dev_->name() +
                  ": CP_INDIRECT_BUFFER.IB_SIZE: 1048576 does not fit in 20 bits (at most 1048575)");
  }
  Signal s = dev_->new_signal();
  ComputeQueue q(*dev_);
  q.signal(s, 1);
  q.submit();
  s.wait(1);
  dev_->driver().check_faults();
}

INSTANTIATE_TEST_SUITE_P(Adreno, Uav, ::testing::Values("a660", "a740", "a660_msm", "a740_msm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hcq::qcom
