// One field moved in a test-only pm4.def (tests/amd/moved/amd/meson.build: RELEASE_MEM DATA_SEL
// from dword 2 bits 31:29 to bits 6:4, nothing else changed), and this file, the AMD encoder,
// decoder and emulated engine built against it (in namespace hcq::amd_moved, -Damd=amd_moved).
// The encoder writes the field at its new place, the decoder reads it there and the emulated
// GPU executes the signal from there: the three follow one description together.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "amd/decode.hpp"
#include "amd/emu/engine.hpp"
#include "amd/encoders.hpp"

namespace hcq::amd::emu {
namespace {

using namespace std::chrono_literals;

TEST(MovedField, TheDescriptionHasTheMovedLayout) {
  EXPECT_EQ(pm4::RELEASE_MEM_DATA_SEL.dword, 2);
  EXPECT_EQ(pm4::RELEASE_MEM_DATA_SEL.lo, 4);
}

TEST(MovedField, EncoderDecoderAndEmulatorFollowTogether) {
  // Encoder: DATA_SEL 2 (64-bit data) lands in bits 6:4 of dword 2; bits 31:29 stay clear.
  Pm4Encoder enc(Gen::Gfx11, {});
  CommandStream cs;
  std::vector<PatchSite> sites;
  struct Events : GpuEvents {
    void interrupt(uint32_t) override {}
    void fault(uint32_t, bool, uint64_t, const std::string& what) override { faults += what; }
    std::string faults;
  } events;
  hcq::emu::Memory mem;
  constexpr size_t kBytes = 4096;
  auto* page = static_cast<std::byte*>(std::aligned_alloc(kBytes, kBytes));
  std::memset(page, 0, kBytes);
  const uint64_t base = reinterpret_cast<uint64_t>(page);
  mem.map(base, kBytes);
  const uint64_t ring_va = base, ctl_va = base + 2048, target_va = base + 3072;
  enc.signal(cs, target_va, 0x1122334455667788ull, false, sites);
  ASSERT_EQ(cs.size(), 8u);
  EXPECT_EQ(cs.data()[2], 2u << 4);  // DST_SEL 0, INT_SEL 0, DATA_SEL 2 at bit 4

  // Decoder: the field read at its new place.
  auto ps = decode_pm4(std::span<const uint32_t>(cs.data(), cs.size()), Gen::Gfx11);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_TRUE(ps[0].ok) << ps[0].problem;
  bool found = false;
  for (auto& [name, v] : ps[0].fields)
    if (name == "DATA_SEL") {
      found = true;
      EXPECT_EQ(v, 2u);
    }
  EXPECT_TRUE(found);

  // Emulated GPU: it reads DATA_SEL there and writes the 64-bit value.
  {
    Engine engine(Gen::Gfx11, mem, events);
    std::memcpy(page, cs.data(), cs.size() * 4);
    volatile uint64_t doorbell = 0;
    QueueDesc q;
    q.type = QueueDesc::Type::Pm4;
    q.id = 1;
    q.ring_va = ring_va;
    q.ring_bytes = 1024;
    q.rptr_va = ctl_va;
    q.wptr_va = ctl_va + 8;
    q.doorbell = &doorbell;
    engine.add_queue(q);
    __atomic_store_n(&doorbell, uint64_t{cs.size()}, __ATOMIC_RELEASE);
    engine.kick();
    auto* target = reinterpret_cast<uint64_t*>(page + (target_va - base));
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (__atomic_load_n(target, __ATOMIC_ACQUIRE) == 0 && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(100us);
    EXPECT_EQ(__atomic_load_n(target, __ATOMIC_ACQUIRE), 0x1122334455667788ull);
    EXPECT_EQ(events.faults, "");
    engine.remove_queue(1);
  }
  mem.unmap(base);
  std::free(page);
}

}  // namespace
}  // namespace hcq::amd::emu
