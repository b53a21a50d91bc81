// GFX and SDMA queues of the AM driver (am::Gfx, am::ComputeQueue, am::SdmaQueue) against the
// emulated GPU's queue model (emu::AmGfx) through an emulated register window, at the
// addresses the emulated RX 7900 XTX's IP discovery table gives. The model hands activated
// queues to the emulated engine over a hcq::emu::Memory (GPU addresses are host addresses
// here); doorbells are a host array; IH entries are collected from AmBus::interrupt.
#include "amd/am/gfx.hpp"
#include "amd/am/mqd.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "amd/am/discovery.hpp"
#include "amd/am/register_io.hpp"
#include "amd/am/sdma.hpp"
#include "amd/am_block_harness.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "amd/emu/am_gfx.hpp"
#include "amd/packets.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "emu/memory.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {
namespace {

using namespace std::chrono_literals;
using testing_support::error_of;
namespace gc = gc_11_0_0;

// VRAM for the MQD: a host buffer, MC addresses from the emulated fb_base.
class TestBootMemory final : public BootMemory {
 public:
  static constexpr uint64_t kFbBase = 0x8000000000;
  VramBuffer alloc(uint64_t size, uint64_t align, const char* what) override {
    next_ = (next_ + align - 1) / align * align;
    if (next_ + size > vram_.size()) throw Error(std::string("VRAM exhausted: ") + what);
    VramBuffer b{next_, kFbBase + next_, size, vram_.data() + next_};
    std::memset(b.cpu, 0, size);
    next_ += size;
    return b;
  }
  uint64_t mc(uint64_t pa) const override { return kFbBase + pa; }

 private:
  std::vector<std::byte> vram_ = std::vector<std::byte>(1 << 20);
  uint64_t next_ = 0x10000;
};

// An aligned, zeroed host buffer mapped in the engine's memory.
class Buf {
 public:
  Buf(hcq::emu::Memory& m, size_t bytes) : mem_(m), size_((bytes + 4095) / 4096 * 4096) {
    p_ = static_cast<std::byte*>(std::aligned_alloc(4096, size_));
    std::memset(p_, 0, size_);
    mem_.map(va(), size_);
  }
  ~Buf() {
    mem_.unmap(va());
    std::free(p_);
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  uint64_t va(uint64_t off = 0) const { return reinterpret_cast<uint64_t>(p_) + off; }
  uint32_t* u32(uint64_t off = 0) const { return reinterpret_cast<uint32_t*>(p_ + off); }

 private:
  hcq::emu::Memory& mem_;
  size_t size_;
  std::byte* p_;
};

template <class P>
bool eventually(P pred) {
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(50us);
  }
  return true;
}

uint32_t load(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

// Packets from the public field descriptions (pm4.def, sdma.def).
struct Pkt {
  std::vector<uint32_t> d;
  Pkt& set(const Field& f, uint64_t v) {
    d[f.dword] |= f(v);
    return *this;
  }
  Pkt& lo_hi(const Field& lo, const Field& hi, uint64_t v) {
    return set(lo, v & 0xffffffffu).set(hi, v >> 32);
  }
};

std::vector<uint32_t> release_mem(uint64_t va, uint64_t data, uint32_t ctx) {
  using namespace pm4;
  Pkt p{std::vector<uint32_t>(8, 0)};
  p.d[0] = header(RELEASE_MEM, 7);
  return p.set(RELEASE_MEM_EVENT_TYPE, V_RELEASE_MEM_EVENT_TYPE_CACHE_FLUSH_AND_INV_TS_EVENT)
      .set(RELEASE_MEM_EVENT_INDEX, V_RELEASE_MEM_EVENT_INDEX_END_OF_PIPE)
      .set(RELEASE_MEM_DATA_SEL, V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA)
      .set(RELEASE_MEM_INT_SEL, V_RELEASE_MEM_INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM)
      .lo_hi(RELEASE_MEM_ADDRESS_LO, RELEASE_MEM_ADDRESS_HI, va)
      .lo_hi(RELEASE_MEM_DATA_LO, RELEASE_MEM_DATA_HI, data)
      .set(RELEASE_MEM_INT_CTXID, ctx)
      .d;
}

std::vector<uint32_t> sdma_copy(uint64_t dst, uint64_t src, uint64_t bytes) {
  using namespace sdma;
  Pkt p{std::vector<uint32_t>(7, 0)};
  p.d[0] = header(COPY_LINEAR, 0);
  return p.set(copy_count_field(Gen::Gfx11), bytes - 1)
      .lo_hi(COPY_LINEAR_SRC_ADDR_LO_ALL, COPY_LINEAR_SRC_ADDR_HI_ALL, src)
      .lo_hi(COPY_LINEAR_DST_ADDR_LO_ALL, COPY_LINEAR_DST_ADDR_HI_ALL, dst)
      .d;
}

std::vector<uint32_t> sdma_trap(uint32_t ctx) {
  Pkt p{std::vector<uint32_t>(2, 0)};
  p.d[0] = sdma::header(sdma::TRAP, 0);
  return p.set(sdma::TRAP_INT_CONTEXT_ALL, ctx).d;
}

// tinygrad's doorbell indices (AMDGPU_NAVI10_DOORBELL_MEC_RING0 3, _sDMA_ENGINE0 0x100; Linux
// amdgpu_doorbell.h _sDMA_ENGINE1 0x10A), as dwords of the doorbell BAR (64-bit doorbells:
// index * 2).
constexpr uint32_t kMecDoorbellDword = 3 * 2, kSdmaDoorbellDword = 0x100 * 2,
                   kSdma1DoorbellDword = 0x10A * 2;
// Linux's MEC doorbell range: KIQ (0) .. USERQUEUE_END (0x8a), 64-bit doorbells, in bytes.
constexpr uint32_t kMecRangeFirst = 0, kMecRangeLast = 0x8a * 8;

class AmGfxTest : public ::testing::Test {
 protected:
  AmGfxTest() {
    router.add(model);
    router.record(true);
  }
  IpSegmentBases bases = test::gfx1100_bases();
  hcq::emu::Memory memory;
  std::vector<uint64_t> doorbells = std::vector<uint64_t>(0x1000);  // 32 KiB of the BAR
  std::atomic<bool> rlc_done{true}, mec_fw{true}, sdma_fw{true};
  std::mutex ih_mutex;
  std::vector<std::array<uint32_t, 8>> ih;
  struct Fault {
    std::string queue;
    bool memory;
    uint64_t address;
  };
  std::vector<Fault> faults;  // under ih_mutex
  emu::AmBus bus = make_bus();
  emu::AmGfx model{bases, bus, memory,
                   emu::AmGfxHooks{[this] { return rlc_done.load(); },
                                   [this] { return mec_fw.load(); },
                                   [this] { return sdma_fw.load(); },
                                   [this](const std::string& queue, bool mem, uint64_t address,
                                          const std::string&) {
                                     std::lock_guard lock(ih_mutex);
                                     faults.push_back({queue, mem, address});
                                   }}};
  test::Router router{bases};
  os::EmulatedMmio mmio{"BAR5", 1 << 20, router};
  RegisterIo io{mmio, bases};
  TestBootMemory vram;
  std::array<TestBootMemory, 4> thread_vram;  // BootMemory is used from one thread each
  Firmware mec = make_mec();
  TestBootMemory& vram_for(uint32_t i) { return thread_vram[i]; }

  emu::AmBus make_bus() {
    emu::AmBus b;
    b.doorbells = {reinterpret_cast<uint8_t*>(doorbells.data()), doorbells.size() * 8};
    b.fb_base = TestBootMemory::kFbBase;
    b.interrupt = [this](const std::array<uint32_t, 8>& e) {
      std::lock_guard lock(ih_mutex);
      ih.push_back(e);
    };
    return b;
  }
  static Firmware make_mec() {
    Firmware f;
    f.path = "/fw/gc_11_0_0_mec.bin";
    f.kind = FirmwareKind::Mec;
    f.ucode_start_addr = 0x0000000700001234;  // hi 7: exercises both halves of the encoding
    return f;
  }
  void ring_doorbell(uint32_t dword, uint64_t value) {
    __atomic_store_n(&doorbells[dword / 2], value, __ATOMIC_RELEASE);
  }
  size_t ih_count() {
    std::lock_guard lock(ih_mutex);
    return ih.size();
  }
  uint32_t read_banked(const Reg& r, uint32_t me, uint32_t pipe, uint32_t queue, uint32_t vmid) {
    uint32_t sel = 0;
    const RegDesc& g = describe(gc::GRBM_GFX_CNTL);
    sel = g.field("MEID").set(sel, me);
    sel = g.field("PIPEID").set(sel, pipe);
    sel = g.field("QUEUEID").set(sel, queue);
    sel = g.field("VMID").set(sel, vmid);
    io.write(gc::GRBM_GFX_CNTL, sel);
    const uint32_t v = io.read(r);
    io.write(gc::GRBM_GFX_CNTL, 0);
    return v;
  }
  std::string name_of(uint64_t offset) {
    for (const RegDesc& r : registers())
      if (r.reg.ip == Ip::GC && absolute_dword(r, bases) * 4 == offset) return std::string(r.name);
    return hex(offset);
  }
};

TEST_F(AmGfxTest, RlcAutoloadWaitTimesOutNamingBothRegisters) {
  rlc_done = false;
  Gfx gfx(io, 2ms);
  EXPECT_EQ(error_of<TimeoutError>([&] { gfx.wait_rlc_autoload(); }),
            "RLC autoload: waited 2 ms for CP_STAT 0x0 and "
            "RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE 1, last read CP_STAT 0x80000000, "
            "RLC_RLCS_BOOTLOAD_STATUS 0x0");
  rlc_done = true;
  EXPECT_EQ(error_of<TimeoutError>([&] { gfx.wait_rlc_autoload(); }), "no error");
}

TEST_F(AmGfxTest, InitProgramsMecApertureAndDoorbellRange) {
  Gfx gfx(io);
  gfx.init(mec, kMecRangeFirst, kMecRangeLast);
  // ucode_start_addr 0x7'00001234: lo >> 2 | hi << 30, hi >> 2, on each pipe of ME 1.
  for (uint32_t pipe = 0; pipe < 4; ++pipe) {
    EXPECT_EQ(read_banked(gc::CP_MEC_RS64_PRGRM_CNTR_START, 1, pipe, 0, 0), 0xc000048du);
    EXPECT_EQ(read_banked(gc::CP_MEC_RS64_PRGRM_CNTR_START_HI, 1, pipe, 0, 0), 0x1u);
  }
  // ADDRESS_MODE 0 (64), ALIGNMENT_MODE 3 (bits 2-3), INITIAL_INST_PREFETCH 3 (bits 14-15);
  // SHARED_BASE 1 (bits 16-31), PRIVATE_BASE 2.
  for (uint32_t vmid : {0u, 7u, 15u}) {
    EXPECT_EQ(read_banked(gc::SH_MEM_CONFIG, 0, 0, 0, vmid), 0xcu | 0xc000u);
    EXPECT_EQ(read_banked(gc::SH_MEM_BASES, 0, 0, 0, vmid), 0x00010002u);
  }
  EXPECT_EQ(io.read(gc::CP_MEC_DOORBELL_RANGE_LOWER), 0x0u);
  EXPECT_EQ(io.read(gc::CP_MEC_DOORBELL_RANGE_UPPER), 0x450u);
  // Pipes 0-3 active (bits 26-29), no reset, MEC_HALT (bit 30) clear.
  EXPECT_EQ(io.read(gc::CP_MEC_RS64_CNTL), 0x3c000000u);
  EXPECT_EQ(io.read(gc::GRBM_GFX_CNTL), 0x0u);

  Firmware f32 = mec;
  f32.ucode_start_addr = 0;
  EXPECT_EQ(error_of([&] { gfx.config_mec(f32); }),
            "/fw/gc_11_0_0_mec.bin: not an RS64 MEC firmware (ucode_start_addr 0x0)");
  EXPECT_EQ(error_of([&] { gfx.set_mec_doorbell_range(0x10, 0x8); }),
            "MEC doorbell range [0x10, 0x8] is not an ordered pair of dword offsets below 0x1000");
}

struct QueueBuffers {
  Buf ring, rptr, wptr, eop, data;
  explicit QueueBuffers(hcq::emu::Memory& m)
      : ring(m, 4096), rptr(m, 4096), wptr(m, 4096), eop(m, 4096), data(m, 4096) {}
  ComputeQueueConfig compute(uint32_t pipe = 0, uint32_t queue = 0) const {
    ComputeQueueConfig c;
    c.pipe = pipe;
    c.queue = queue;
    c.ring_va = ring.va();
    c.ring_bytes = 4096;
    c.rptr_va = rptr.va();
    c.wptr_va = wptr.va();
    c.eop_va = eop.va();
    c.doorbell_dword = kMecDoorbellDword;
    return c;
  }
  SdmaQueueConfig copy(uint32_t engine = 0) const {
    SdmaQueueConfig c;
    c.engine = engine;
    c.ring_va = ring.va();
    c.ring_bytes = 4096;
    c.rptr_va = rptr.va();
    c.wptr_va = wptr.va();
    c.doorbell_dword = engine == 0 ? kSdmaDoorbellDword : kSdma1DoorbellDword;
    return c;
  }
};

TEST_F(AmGfxTest, ComputeQueueRunsReleaseMemAfterDoorbell) {
  Gfx gfx(io);
  gfx.init(mec, kMecRangeFirst, kMecRangeLast);
  QueueBuffers b(memory);
  router.take_raw_writes();
  ComputeQueue q(gfx, vram, b.compute(1, 2));

  // The HQD registers in gfx_v11_0_kiq_init_register's order, between the selections.
  std::vector<std::string> names;
  for (const auto& w : router.take_raw_writes()) names.push_back(name_of(w.first));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "GRBM_GFX_CNTL", "CP_HQD_EOP_BASE_ADDR", "CP_HQD_EOP_BASE_ADDR_HI",
                       "CP_HQD_EOP_CONTROL", "CP_HQD_PQ_DOORBELL_CONTROL", "CP_MQD_BASE_ADDR",
                       "CP_MQD_BASE_ADDR_HI", "CP_MQD_CONTROL", "CP_HQD_PQ_BASE",
                       "CP_HQD_PQ_BASE_HI", "CP_HQD_PQ_CONTROL", "CP_HQD_PQ_RPTR_REPORT_ADDR",
                       "CP_HQD_PQ_RPTR_REPORT_ADDR_HI", "CP_HQD_PQ_WPTR_POLL_ADDR",
                       "CP_HQD_PQ_WPTR_POLL_ADDR_HI", "CP_HQD_PQ_DOORBELL_CONTROL",
                       "CP_HQD_PQ_WPTR_LO", "CP_HQD_PQ_WPTR_HI", "CP_HQD_VMID",
                       "CP_HQD_PERSISTENT_STATE", "CP_HQD_ACTIVE", "GRBM_GFX_CNTL"}));
  EXPECT_TRUE(model.compute_queue_running(1, 1, 2));
  EXPECT_EQ(read_banked(gc::CP_HQD_ACTIVE, 1, 1, 2, 0), 0x1u);
  EXPECT_EQ(read_banked(gc::CP_HQD_PQ_BASE, 1, 1, 2, 0), uint32_t(b.ring.va() >> 8));
  // QUEUE_SIZE 9 (1024 dwords), RPTR_BLOCK_SIZE 9, UNORD_DISPATCH, PRIV_STATE, KMD_QUEUE.
  EXPECT_EQ(read_banked(gc::CP_HQD_PQ_CONTROL, 1, 1, 2, 0), 0xd0000909u);
  // DOORBELL_OFFSET 6 (bits 2-27), DOORBELL_EN (bit 30).
  EXPECT_EQ(read_banked(gc::CP_HQD_PQ_DOORBELL_CONTROL, 1, 1, 2, 0), 0x40000018u);
  EXPECT_EQ(read_banked(gc::CP_HQD_ACTIVE, 1, 0, 0, 0), 0x0u);  // another HQD

  // The MQD in VRAM: header, thread masks, the HQD image from dword 128.
  const auto* m = reinterpret_cast<const uint32_t*>(q.mqd().cpu);
  EXPECT_EQ(m[0], 0xc0310800u);
  EXPECT_EQ(m[23], 0xffffffffu);
  EXPECT_EQ(m[128], uint32_t(q.mqd().mc));
  EXPECT_EQ(m[129], uint32_t(q.mqd().mc >> 32));
  EXPECT_EQ(m[130], 1u);  // cp_hqd_active
  EXPECT_EQ(m[128 + (gc::CP_HQD_PQ_CONTROL.offset - gc::CP_MQD_BASE_ADDR.offset)], 0xd0000909u);

  const std::vector<uint32_t> p = release_mem(b.data.va(), 0x1122334455667788, 0x42);
  std::memcpy(b.ring.u32(), p.data(), p.size() * 4);
  ring_doorbell(kMecDoorbellDword, p.size());
  ASSERT_TRUE(eventually([&] { return load(b.data.u32(4)) == 0x11223344u; }));
  EXPECT_EQ(load(b.data.u32()), 0x55667788u);
  ASSERT_TRUE(eventually([&] { return ih_count() == 1; }));
  std::lock_guard lock(ih_mutex);
  // client SOC21 GRBM_CP 0x14, source CP_EOP 181 (0xb5), ring_id ME 1 << 2 | pipe 1 | queue 2
  // << 4 = 0x25; context id in dword 4.
  EXPECT_EQ(ih[0][0], 0x0025b514u);
  EXPECT_EQ(ih[0][4], 0x42u);
}

// The MQD description (mqd_v11.def) against struct v11_compute_mqd's "offset:" comments.
TEST(MqdDescription, DwordsSitWhereV11StructsPutsThem) {
  namespace mqd = mqd_v11;
  EXPECT_EQ(mqd::kBytes, 2048u);
  EXPECT_EQ(mqd::COMPUTE_PIPELINESTAT_ENABLE, 11u);
  EXPECT_EQ(mqd::COMPUTE_STATIC_THREAD_MGMT_SE2, 26u);
  EXPECT_EQ(mqd::COMPUTE_MISC_RESERVED, 32u);
  EXPECT_EQ(mqd::hqd_dword(gc::CP_MQD_BASE_ADDR), 128u);   // cp_mqd_base_addr_lo
  EXPECT_EQ(mqd::hqd_dword(gc::CP_HQD_ACTIVE), 130u);      // cp_hqd_active
  EXPECT_EQ(mqd::hqd_dword(gc::CP_HQD_PQ_CONTROL), 145u);  // cp_hqd_pq_control
  EXPECT_EQ(mqd::hqd_dword(gc::CP_MQD_CONTROL), 162u);     // cp_mqd_control
  EXPECT_EQ(mqd::hqd_dword(gc::CP_HQD_EOP_CONTROL), 167u);  // cp_hqd_eop_control
  EXPECT_EQ(mqd::hqd_dword(gc::CP_HQD_PQ_WPTR_HI), 183u);  // cp_hqd_pq_wptr_hi
  EXPECT_EQ(error_of<InvalidInput>([] { mqd::hqd_dword(gc::SCRATCH_REG7); }),
            "SCRATCH_REG7 is not in the gfx11 MQD's HQD image (dwords 128..511)");
}

TEST_F(AmGfxTest, DequeueStopsTheQueue) {
  Gfx gfx(io);
  gfx.init(mec, kMecRangeFirst, kMecRangeLast);
  QueueBuffers b(memory);
  ComputeQueue q(gfx, vram, b.compute());
  q.destroy();
  EXPECT_FALSE(model.compute_queue_running(1, 0, 0));
  EXPECT_EQ(read_banked(gc::CP_HQD_ACTIVE, 1, 0, 0, 0), 0x0u);
  const std::vector<uint32_t> p = release_mem(b.data.va(), 7, 0);
  std::memcpy(b.ring.u32(), p.data(), p.size() * 4);
  ring_doorbell(kMecDoorbellDword, p.size());
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(load(b.data.u32()), 0u);
  EXPECT_EQ(ih_count(), 0u);
  q.destroy();  // idempotent
}

TEST_F(AmGfxTest, ActivationRefusedWithoutMecFirmware) {
  Gfx gfx(io);
  gfx.init(mec, kMecRangeFirst, kMecRangeLast);
  mec_fw = false;
  QueueBuffers b(memory);
  EXPECT_EQ(error_of<Error>([&] { ComputeQueue q(gfx, vram, b.compute()); }),
            "compute queue ME 1 pipe 0 queue 0: CP_HQD_ACTIVE reads 0x0 after activation");
  EXPECT_EQ(model.last_error(),
            "compute queue ME 1 pipe 0 queue 0: activation refused: no MEC firmware loaded");
  EXPECT_FALSE(model.compute_queue_running(1, 0, 0));
  EXPECT_EQ(io.read(gc::GRBM_GFX_CNTL), 0x0u);  // selection restored after the failure
}

TEST_F(AmGfxTest, ActivationRefusedForDoorbellOutsideMecRange) {
  Gfx gfx(io);
  gfx.init(mec, 0, 0x10);
  QueueBuffers b(memory);
  EXPECT_EQ(error_of<Error>([&] { ComputeQueue q(gfx, vram, b.compute()); }),
            "compute queue ME 1 pipe 0 queue 0: CP_HQD_ACTIVE reads 0x0 after activation");
  EXPECT_EQ(model.last_error(),
            "compute queue ME 1 pipe 0 queue 0: activation refused: doorbell at byte 0x18 is "
            "outside the MEC doorbell range [0x0, 0x10]");
}

TEST_F(AmGfxTest, ActivationRefusedWhileMecHalted) {
  Gfx gfx(io);
  gfx.wait_rlc_autoload();
  gfx.config_mec(mec);
  gfx.set_mec_doorbell_range(kMecRangeFirst, kMecRangeLast);
  QueueBuffers b(memory);
  EXPECT_EQ(error_of<Error>([&] { ComputeQueue q(gfx, vram, b.compute()); }),
            "compute queue ME 1 pipe 0 queue 0: CP_HQD_ACTIVE reads 0x0 after activation");
  EXPECT_EQ(model.last_error(),
            "compute queue ME 1 pipe 0 queue 0: activation refused: MEC pipe 0 is not running "
            "(CP_MEC_RS64_CNTL 0x40000000)");
  // Halting the MEC stops a running queue.
  gfx.enable_mec(true);
  ComputeQueue q(gfx, vram, b.compute());
  EXPECT_TRUE(model.compute_queue_running(1, 0, 0));
  gfx.enable_mec(false);
  EXPECT_FALSE(model.compute_queue_running(1, 0, 0));
}

TEST_F(AmGfxTest, QueueFaultReachesTheHookWithItsHqd) {
  Gfx gfx(io);
  gfx.init(mec, kMecRangeFirst, kMecRangeLast);
  QueueBuffers b(memory);
  ComputeQueue q(gfx, vram, b.compute(2, 3));
  const std::vector<uint32_t> p = release_mem(0x1000, 1, 0);  // nothing mapped there
  std::memcpy(b.ring.u32(), p.data(), p.size() * 4);
  ring_doorbell(kMecDoorbellDword, p.size());
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(ih_mutex);
    return !faults.empty();
  }));
  std::lock_guard lock(ih_mutex);
  EXPECT_EQ(faults[0].queue, "compute queue ME 1 pipe 2 queue 3");
  EXPECT_TRUE(faults[0].memory);
  EXPECT_EQ(faults[0].address, 0x1000u);
}

// Gfx serialises GRBM_GFX_CNTL selections: queues on four pipes created and destroyed from
// four threads at once all come up with their own registers and run.
TEST_F(AmGfxTest, QueuesCreatedFromSeveralThreads) {
  Gfx gfx(io);
  gfx.init(mec, kMecRangeFirst, kMecRangeLast);
  std::vector<std::unique_ptr<QueueBuffers>> bufs;
  for (int i = 0; i < 4; ++i) bufs.push_back(std::make_unique<QueueBuffers>(memory));
  std::vector<std::thread> threads;
  std::atomic<int> ran{0};
  for (uint32_t pipe = 0; pipe < 4; ++pipe)
    threads.emplace_back([&, pipe] {
      QueueBuffers& b = *bufs[pipe];
      ComputeQueueConfig c = b.compute(pipe, 3 - pipe);
      c.doorbell_dword = kMecDoorbellDword + 2 * pipe;
      ComputeQueue q(gfx, vram_for(pipe), c);
      const std::vector<uint32_t> p = release_mem(b.data.va(), 0x100 + pipe, 0);
      std::memcpy(b.ring.u32(), p.data(), p.size() * 4);
      ring_doorbell(c.doorbell_dword, p.size());
      if (eventually([&] { return load(b.data.u32()) == 0x100 + pipe; })) ++ran;
      q.destroy();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ran.load(), 4);
  for (uint32_t pipe = 0; pipe < 4; ++pipe)
    EXPECT_FALSE(model.compute_queue_running(1, pipe, 3 - pipe));
  EXPECT_EQ(io.read(gc::GRBM_GFX_CNTL), 0x0u);
}

TEST_F(AmGfxTest, ComputeQueueConfigErrors) {
  Gfx gfx(io);
  QueueBuffers b(memory);
  ComputeQueueConfig c = b.compute();
  c.ring_bytes = 0x300;
  EXPECT_EQ(error_of([&] { ComputeQueue q(gfx, vram, c); }),
            "compute queue ME 1 pipe 0 queue 0: ring size 0x300 is not a power of two from "
            "0x100 to 0x800000");
  c = b.compute();
  c.me = 2;
  EXPECT_EQ(error_of([&] { ComputeQueue q(gfx, vram, c); }),
            "compute queue ME 2 pipe 0 queue 0: gfx1100 has ME 1 only, pipes 0..3, queues 0..3");
  c = b.compute(0, 4);  // Linux programs 4 queues a pipe on GC 11.0.0 (gfx_v11_0_sw_init)
  EXPECT_EQ(error_of([&] { ComputeQueue q(gfx, vram, c); }),
            "compute queue ME 1 pipe 0 queue 4: gfx1100 has ME 1 only, pipes 0..3, queues 0..3");
  c = b.compute();
  c.doorbell_dword = 7;
  EXPECT_EQ(error_of([&] { ComputeQueue q(gfx, vram, c); }),
            "compute queue ME 1 pipe 0 queue 0: doorbell dword 0x7 is odd (gfx11 doorbells are "
            "64-bit)");
}

TEST_F(AmGfxTest, SdmaQueueCopies) {
  QueueBuffers b(memory);
  Buf src(memory, 4096), dst(memory, 4096);
  for (uint32_t i = 0; i < 64; ++i) src.u32()[i] = 0xa5a50000u + i;
  router.take_raw_writes();
  SdmaQueue q(io, b.copy());
  std::vector<std::string> names;
  for (const auto& w : router.take_raw_writes()) names.push_back(name_of(w.first));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "SDMA0_QUEUE0_RB_CNTL", "SDMA0_QUEUE0_RB_RPTR", "SDMA0_QUEUE0_RB_RPTR_HI",
                       "SDMA0_QUEUE0_RB_WPTR", "SDMA0_QUEUE0_RB_WPTR_HI",
                       "SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO", "SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI",
                       "SDMA0_QUEUE0_RB_RPTR_ADDR_HI", "SDMA0_QUEUE0_RB_RPTR_ADDR_LO",
                       "SDMA0_QUEUE0_RB_BASE", "SDMA0_QUEUE0_RB_BASE_HI",
                       "SDMA0_QUEUE0_MINOR_PTR_UPDATE", "SDMA0_QUEUE0_RB_WPTR",
                       "SDMA0_QUEUE0_RB_WPTR_HI", "SDMA0_QUEUE0_DOORBELL",
                       "SDMA0_QUEUE0_DOORBELL_OFFSET", "SDMA0_QUEUE0_MINOR_PTR_UPDATE",
                       "SDMA0_WATCHDOG_CNTL", "SDMA0_UTCL1_CNTL", "SDMA0_UTCL1_PAGE",
                       "SDMA0_F32_CNTL", "SDMA0_QUEUE0_RB_CNTL", "SDMA0_QUEUE0_IB_CNTL"}));
  EXPECT_TRUE(model.sdma_queue_running());
  // RB_ENABLE, RB_SIZE 10 (1024 dwords), F32_WPTR_POLL_ENABLE, RPTR_WRITEBACK_ENABLE, timer 4,
  // RB_PRIV.
  EXPECT_EQ(io.read(gc::SDMA0_QUEUE0_RB_CNTL), 0x00841815u);
  EXPECT_EQ(io.read(gc::SDMA0_QUEUE0_DOORBELL_OFFSET), 0x800u);

  std::vector<uint32_t> p = sdma_copy(dst.va(), src.va(), 256);
  const std::vector<uint32_t> t = sdma_trap(0x77);
  p.insert(p.end(), t.begin(), t.end());
  std::memcpy(b.ring.u32(), p.data(), p.size() * 4);
  ring_doorbell(kSdmaDoorbellDword, p.size() * 4);  // SDMA doorbells count bytes
  ASSERT_TRUE(eventually([&] { return ih_count() == 1; }));
  EXPECT_EQ(std::memcmp(dst.u32(), src.u32(), 256), 0);
  EXPECT_EQ(load(dst.u32(256)), 0u);  // nothing past the 256 bytes
  {
    std::lock_guard lock(ih_mutex);
    // client SOC21 GFX 0x0a, source SDMA_TRAP 49 (0x31), ring_id 0 (SDMA0 queue 0).
    EXPECT_EQ(ih[0][0], 0x0000310au);
    EXPECT_EQ(ih[0][4], 0x77u);
  }
  q.stop();
  EXPECT_FALSE(model.sdma_queue_running());
  EXPECT_EQ(io.read(gc::SDMA0_QUEUE0_DOORBELL), 0x0u);
}

TEST_F(AmGfxTest, SdmaQueueRefusedWithoutFirmware) {
  sdma_fw = false;
  QueueBuffers b(memory);
  EXPECT_EQ(error_of<Error>([&] { SdmaQueue q(io, b.copy()); }),
            "SDMA0 queue 0: SDMA0_QUEUE0_RB_CNTL.RB_ENABLE reads 0 after enabling (register "
            "0x841814)");
  EXPECT_EQ(model.last_error(), "SDMA0 queue 0: RB_ENABLE refused: no SDMA firmware loaded");
  EXPECT_FALSE(model.sdma_queue_running());
}

// SDMA1 queue 0: every register SDMA1's (0x600 dwords past SDMA0's; F32_CNTL 0x20 past), with
// exactly the values sdma_v6_0_gfx_resume_instance writes; its copies run and its trap names
// instance 1 (ring_id 1 << 4).
TEST_F(AmGfxTest, SdmaQueueOnEngine1WritesSdma1RegistersAndCopies) {
  QueueBuffers b(memory);
  Buf src(memory, 4096), dst(memory, 4096);
  for (uint32_t i = 0; i < 64; ++i) src.u32()[i] = 0x5a5a0000u + i;
  router.take_raw_writes();
  SdmaQueue q(io, b.copy(1));
  std::vector<std::pair<std::string, uint32_t>> writes;
  for (const auto& w : router.take_raw_writes()) writes.push_back({name_of(w.first), w.second});
  const uint64_t ring = b.ring.va(), rptr = b.rptr.va(), wptr = b.wptr.va();
  EXPECT_EQ(writes, (std::vector<std::pair<std::string, uint32_t>>{
                        {"SDMA1_QUEUE0_RB_CNTL", 0x00800014u},  // RB_SIZE 10, RB_PRIV
                        {"SDMA1_QUEUE0_RB_RPTR", 0},
                        {"SDMA1_QUEUE0_RB_RPTR_HI", 0},
                        {"SDMA1_QUEUE0_RB_WPTR", 0},
                        {"SDMA1_QUEUE0_RB_WPTR_HI", 0},
                        {"SDMA1_QUEUE0_RB_WPTR_POLL_ADDR_LO", uint32_t(wptr)},
                        {"SDMA1_QUEUE0_RB_WPTR_POLL_ADDR_HI", uint32_t(wptr >> 32)},
                        {"SDMA1_QUEUE0_RB_RPTR_ADDR_HI", uint32_t(rptr >> 32)},
                        {"SDMA1_QUEUE0_RB_RPTR_ADDR_LO", uint32_t(rptr)},
                        {"SDMA1_QUEUE0_RB_BASE", uint32_t(ring >> 8)},
                        {"SDMA1_QUEUE0_RB_BASE_HI", uint32_t(ring >> 40)},
                        {"SDMA1_QUEUE0_MINOR_PTR_UPDATE", 1},
                        {"SDMA1_QUEUE0_RB_WPTR", 0},
                        {"SDMA1_QUEUE0_RB_WPTR_HI", 0},
                        {"SDMA1_QUEUE0_DOORBELL", 0x10000000u},         // ENABLE (bit 28)
                        {"SDMA1_QUEUE0_DOORBELL_OFFSET", 0x214u << 2},  // dword 0x10A * 2
                        {"SDMA1_QUEUE0_MINOR_PTR_UPDATE", 0},
                        {"SDMA1_WATCHDOG_CNTL", 100},
                        {"SDMA1_UTCL1_CNTL", 0x609u},     // RESP_MODE 3 << 9, REDO_DELAY 9
                        {"SDMA1_UTCL1_PAGE", 0x0100e000u},  // RD 2 << 12, WR 3 << 14, NOALLOC
                        {"SDMA1_F32_CNTL", 0},              // power-on HALT cleared
                        {"SDMA1_QUEUE0_RB_CNTL", 0x00841815u},
                        {"SDMA1_QUEUE0_IB_CNTL", 1}}));
  EXPECT_TRUE(model.sdma_queue_running(1));
  EXPECT_FALSE(model.sdma_queue_running(0));
  EXPECT_EQ(io.read(gc::SDMA0_QUEUE0_RB_CNTL), 0x0u);  // SDMA0 untouched

  std::vector<uint32_t> p = sdma_copy(dst.va(), src.va(), 256);
  const std::vector<uint32_t> t = sdma_trap(0x99);
  p.insert(p.end(), t.begin(), t.end());
  std::memcpy(b.ring.u32(), p.data(), p.size() * 4);
  ring_doorbell(kSdmaDoorbellDword, p.size() * 4);  // SDMA0's doorbell: nothing runs
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(load(dst.u32()), 0u);
  ring_doorbell(kSdma1DoorbellDword, p.size() * 4);
  ASSERT_TRUE(eventually([&] { return ih_count() == 1; }));
  EXPECT_EQ(std::memcmp(dst.u32(), src.u32(), 256), 0);
  {
    std::lock_guard lock(ih_mutex);
    // client GFX 0x0a, source SDMA_TRAP 0x31, ring_id 0x10 (instance 1, queue 0).
    EXPECT_EQ(ih[0][0], 0x0010310au);
    EXPECT_EQ(ih[0][4], 0x99u);
  }
  q.stop();
  EXPECT_FALSE(model.sdma_queue_running(1));
  EXPECT_EQ(io.read(gc::SDMA1_QUEUE0_DOORBELL), 0x0u);
  EXPECT_EQ(io.read(gc::SDMA1_QUEUE0_DOORBELL_OFFSET), 0x0u);
}

TEST_F(AmGfxTest, SdmaQueuesOfBothEnginesRunTogether) {
  QueueBuffers b0(memory), b1(memory);
  SdmaQueue q0(io, b0.copy(0)), q1(io, b1.copy(1));
  EXPECT_TRUE(model.sdma_queue_running(0));
  EXPECT_TRUE(model.sdma_queue_running(1));
  for (auto [b, dword, ctx] : {std::tuple{&b0, kSdmaDoorbellDword, 0x10u},
                               std::tuple{&b1, kSdma1DoorbellDword, 0x11u}}) {
    const std::vector<uint32_t> t = sdma_trap(ctx);
    std::memcpy(b->ring.u32(), t.data(), t.size() * 4);
    ring_doorbell(dword, t.size() * 4);
  }
  ASSERT_TRUE(eventually([&] { return ih_count() == 2; }));
  {
    std::lock_guard lock(ih_mutex);
    std::set<std::pair<uint32_t, uint32_t>> got = {{ih[0][0], ih[0][4]}, {ih[1][0], ih[1][4]}};
    EXPECT_EQ(got, (std::set<std::pair<uint32_t, uint32_t>>{{0x0000310au, 0x10u},
                                                             {0x0010310au, 0x11u}}));
  }
  // Halting SDMA1's F32 stops SDMA1's queue only; unhalting starts it again.
  const uint32_t f32 = io.read(gc::SDMA1_F32_CNTL);
  io.write(gc::SDMA1_F32_CNTL, describe(gc::SDMA1_F32_CNTL).field("HALT").set(f32, 1));
  EXPECT_FALSE(model.sdma_queue_running(1));
  EXPECT_TRUE(model.sdma_queue_running(0));
  io.write(gc::SDMA1_F32_CNTL, f32);
  EXPECT_TRUE(model.sdma_queue_running(1));
  model.reset();
  EXPECT_FALSE(model.sdma_queue_running(0));
  EXPECT_FALSE(model.sdma_queue_running(1));
}

TEST_F(AmGfxTest, SdmaQueueOnEngine1RefusedWithoutFirmware) {
  sdma_fw = false;
  QueueBuffers b(memory);
  EXPECT_EQ(error_of<Error>([&] { SdmaQueue q(io, b.copy(1)); }),
            "SDMA1 queue 0: SDMA1_QUEUE0_RB_CNTL.RB_ENABLE reads 0 after enabling (register "
            "0x841814)");
  EXPECT_EQ(model.last_error(), "SDMA1 queue 0: RB_ENABLE refused: no SDMA firmware loaded");
  EXPECT_FALSE(model.sdma_queue_running(1));
}

// The model refuses SDMA1's ring as it does SDMA0's: F32 halted (its power-on state), then the
// doorbell off.
TEST_F(AmGfxTest, ModelRefusesSdma1RingWhileHaltedOrWithoutDoorbell) {
  const uint32_t enable = describe(gc::SDMA1_QUEUE0_RB_CNTL).field("RB_ENABLE").set(0x14, 1);
  io.write(gc::SDMA1_QUEUE0_RB_CNTL, enable);
  EXPECT_EQ(model.last_error(), "SDMA1 queue 0: RB_ENABLE refused: SDMA1_F32_CNTL.HALT is set");
  EXPECT_EQ(io.read(gc::SDMA1_QUEUE0_RB_CNTL), 0x14u);
  io.write(gc::SDMA1_F32_CNTL, 0);
  io.write(gc::SDMA1_QUEUE0_RB_CNTL, enable);
  EXPECT_EQ(model.last_error(), "SDMA1 queue 0: RB_ENABLE refused: SDMA1_QUEUE0_DOORBELL.ENABLE is 0");
  EXPECT_FALSE(model.sdma_queue_running(1));
  EXPECT_EQ(io.read(gc::SDMA0_F32_CNTL), 0x1u);  // SDMA0 still halted
}

TEST_F(AmGfxTest, SdmaQueueConfigErrors) {
  QueueBuffers b(memory);
  SdmaQueueConfig c = b.copy(2);
  EXPECT_EQ(error_of([&] { SdmaQueue q(io, c); }), "SDMA2 queue 0: gfx1100 has SDMA engines 0 and 1");
  c = b.copy(1);
  c.ring_bytes = 0x300;
  EXPECT_EQ(error_of([&] { SdmaQueue q(io, c); }),
            "SDMA1 queue 0: ring size 0x300 is not a power of two from 0x100 to 0x40000000");
  c = b.copy(1);
  c.doorbell_dword = 0x215;
  EXPECT_EQ(error_of([&] { SdmaQueue q(io, c); }),
            "SDMA1 queue 0: doorbell dword 0x215 is odd (gfx11 doorbells are 64-bit)");
  EXPECT_TRUE(router.take_writes().empty());  // nothing written for a refused config
}

TEST_F(AmGfxTest, ResetStopsEveryQueue) {
  Gfx gfx(io);
  gfx.init(mec, kMecRangeFirst, kMecRangeLast);
  QueueBuffers b(memory), c(memory);
  ComputeQueue q(gfx, vram, b.compute(3, 3));
  SdmaQueue s(io, c.copy());
  model.reset();
  EXPECT_FALSE(model.compute_queue_running(1, 3, 3));
  EXPECT_FALSE(model.sdma_queue_running());
  EXPECT_EQ(io.read(gc::CP_MEC_RS64_CNTL), 0x40000000u);
  EXPECT_EQ(io.read(gc::CP_MEC_DOORBELL_RANGE_UPPER), 0x0u);
}

}  // namespace
}  // namespace hcq::amd::am
