// The emulated AMD GPU engine: rings built by hand in mapped host memory, packets encoded with
// the Field constants of pm4.def / sdma.def, exact memory results.
#include "amd/emu/engine.hpp"

#include <elf.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "amd/encoders.hpp"
#include "amd/packets.hpp"
#include "core/error.hpp"
#include "emu/kernels.hpp"

namespace hcq::amd::emu {
namespace {

using hcq::emu::Memory;

using namespace std::chrono_literals;
using hcq::emu::Fault;

// ------------------------------------------------------------------------------------------
// Helpers

// An aligned, zeroed host buffer registered with the emulated GPU's memory.
class Buf {
 public:
  Buf(Memory& m, size_t bytes, size_t align = 4096) : mem_(m) {
    size_ = (bytes + align - 1) / align * align;
    p_ = static_cast<std::byte*>(std::aligned_alloc(align, size_));
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
  template <class T = uint32_t>
  T* at(uint64_t off = 0) const {
    return reinterpret_cast<T*>(p_ + off);
  }
  size_t size() const { return size_; }

 private:
  Memory& mem_;
  std::byte* p_;
  size_t size_;
};

struct Events : GpuEvents {
  struct F {
    uint32_t queue;
    bool memory;
    uint64_t address;
    std::string what;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint32_t> irqs;
  std::vector<F> faults;
  void interrupt(uint32_t ctx) override {
    std::lock_guard lk(mu);
    irqs.push_back(ctx);
    cv.notify_all();
  }
  void fault(uint32_t q, bool memory, uint64_t addr, const std::string& what) override {
    std::lock_guard lk(mu);
    faults.push_back({q, memory, addr, what});
    cv.notify_all();
  }
  bool wait_irqs(size_t n) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, 10s, [&] { return irqs.size() >= n; });
  }
  F wait_fault() {
    std::unique_lock lk(mu);
    if (!cv.wait_for(lk, 10s, [&] { return !faults.empty(); })) return {~0u, false, 0, "no fault"};
    return faults[0];
  }
  void clear() {
    std::lock_guard lk(mu);
    faults.clear();
    irqs.clear();
  }
  size_t fault_count() {
    std::lock_guard lk(mu);
    return faults.size();
  }
};

template <class T>
T load(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

// Spins (with sleeps) until pred holds; generous timeout so a slow machine never fails.
template <class P>
bool eventually(P pred, std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(20us);
  }
  return true;
}

// A packet under construction: fields are OR-ed in at their described dword and bits.
struct Pkt {
  std::vector<uint32_t> d;
  Pkt& set(const Field& f, uint64_t v) {
    EXPECT_EQ(v & ~uint64_t{f.mask()}, 0u) << f.name;
    d[f.dword] |= f(v);
    return *this;
  }
  Pkt& lo_hi(const Field& lo, const Field& hi, uint64_t v) {
    return set(lo, v & 0xffffffffu).set(hi, v >> 32);
  }
};

Pkt pm4p(pm4::Op op, uint32_t body) {
  Pkt p;
  p.d.assign(body + 1, 0);
  p.d[0] = pm4::header(op, body);
  return p;
}

Pkt sdmap(sdma::Op op, uint32_t sub, uint32_t dwords) {
  Pkt p;
  p.d.assign(dwords, 0);
  p.d[0] = sdma::header(op, sub);
  return p;
}

std::vector<uint32_t> cat(std::initializer_list<std::vector<uint32_t>> parts) {
  std::vector<uint32_t> out;
  for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// --- PM4 packets ---

std::vector<uint32_t> pm4_nop(uint32_t body) { return pm4p(pm4::NOP, body).d; }

std::vector<uint32_t> release_mem(uint32_t data_sel, uint32_t int_sel, uint64_t va,
                                  uint64_t data, uint32_t ctx = 0) {
  using namespace pm4;
  return pm4p(RELEASE_MEM, 7)
      .set(RELEASE_MEM_EVENT_TYPE, V_RELEASE_MEM_EVENT_TYPE_CACHE_FLUSH_AND_INV_TS_EVENT)
      .set(RELEASE_MEM_EVENT_INDEX, V_RELEASE_MEM_EVENT_INDEX_END_OF_PIPE)
      .set(RELEASE_MEM_DATA_SEL, data_sel)
      .set(RELEASE_MEM_INT_SEL, int_sel)
      .lo_hi(RELEASE_MEM_ADDRESS_LO, RELEASE_MEM_ADDRESS_HI, va)
      .lo_hi(RELEASE_MEM_DATA_LO, RELEASE_MEM_DATA_HI, data)
      .set(RELEASE_MEM_INT_CTXID, ctx)
      .d;
}

std::vector<uint32_t> wait_mem(uint64_t va, uint32_t ref, uint32_t func = pm4::V_WAIT_REG_MEM_FUNCTION_GREATER_EQUAL) {
  using namespace pm4;
  return pm4p(WAIT_REG_MEM, 6)
      .set(WAIT_REG_MEM_FUNCTION, func)
      .set(WAIT_REG_MEM_MEM_SPACE, 1)
      .lo_hi(WAIT_REG_MEM_ADDRESS_LO, WAIT_REG_MEM_ADDRESS_HI, va)
      .set(WAIT_REG_MEM_REFERENCE, ref)
      .set(WAIT_REG_MEM_MASK, 0xffffffffu)
      .set(WAIT_REG_MEM_POLL_INTERVAL, 4)
      .d;
}

std::vector<uint32_t> wait_mem64(uint64_t va, uint64_t ref, uint64_t mask = ~uint64_t{0}) {
  using namespace pm4;
  return pm4p(WAIT_REG_MEM64, 8)
      .set(WAIT_REG_MEM64_FUNCTION, V_WAIT_REG_MEM64_FUNCTION_GREATER_EQUAL)
      .set(WAIT_REG_MEM64_MEM_SPACE, 1)
      .lo_hi(WAIT_REG_MEM64_ADDRESS_LO, WAIT_REG_MEM64_ADDRESS_HI, va)
      .lo_hi(WAIT_REG_MEM64_REFERENCE_LO, WAIT_REG_MEM64_REFERENCE_HI, ref)
      .lo_hi(WAIT_REG_MEM64_MASK_LO, WAIT_REG_MEM64_MASK_HI, mask)
      .set(WAIT_REG_MEM64_POLL_INTERVAL, 4)
      .d;
}

std::vector<uint32_t> indirect_buffer(uint64_t va, uint32_t dwords, bool chain = false) {
  using namespace pm4;
  return pm4p(INDIRECT_BUFFER, 3)
      .lo_hi(INDIRECT_BUFFER_IB_BASE_LO, INDIRECT_BUFFER_IB_BASE_HI, va)
      .set(INDIRECT_BUFFER_IB_SIZE, dwords)
      .set(INDIRECT_BUFFER_CHAIN, chain)
      .set(INDIRECT_BUFFER_VALID, 1)
      .d;
}

std::vector<uint32_t> set_sh_reg(uint32_t reg, std::vector<uint32_t> values) {
  using namespace pm4;
  auto p = pm4p(SET_SH_REG, uint32_t(values.size()) + 1).set(SET_SH_REG_REG_OFFSET, reg - kShRegBase);
  std::copy(values.begin(), values.end(), p.d.begin() + 2);
  return p.d;
}

std::vector<uint32_t> dispatch_direct(uint32_t x, uint32_t y, uint32_t z) {
  using namespace pm4;
  return pm4p(DISPATCH_DIRECT, 4)
      .set(DISPATCH_DIRECT_DIM_X, x)
      .set(DISPATCH_DIRECT_DIM_Y, y)
      .set(DISPATCH_DIRECT_DIM_Z, z)
      .set(DISPATCH_DIRECT_DISPATCH_INITIATOR,
           regs::COMPUTE_DISPATCH_INITIATOR_COMPUTE_SHADER_EN_ALL(1) |
               regs::COMPUTE_DISPATCH_INITIATOR_FORCE_START_AT_000_ALL(1))
      .d;
}

std::vector<uint32_t> acquire_mem(Gen gen) {
  using namespace pm4;
  auto p = pm4p(ACQUIRE_MEM, gen == Gen::Gfx9 ? 6 : 7)
               .set(ACQUIRE_MEM_COHER_SIZE, 0xffffffffu)
               .set(ACQUIRE_MEM_COHER_SIZE_HI, 0xff)
               .set(ACQUIRE_MEM_POLL_INTERVAL, 10);
  if (gen == Gen::Gfx9)
    p.set(ACQUIRE_MEM_COHER_SH_KCACHE_ACTION_ENA, 1).set(ACQUIRE_MEM_COHER_TCL1_ACTION_ENA, 1);
  else
    p.set(ACQUIRE_MEM_GCR_GLV_INV, 1).set(ACQUIRE_MEM_GCR_GL1_INV, 1).set(ACQUIRE_MEM_GCR_GLK_INV, 1);
  return p.d;
}

std::vector<uint32_t> event_write_cs_partial_flush() {
  using namespace pm4;
  return pm4p(EVENT_WRITE, 1)
      .set(EVENT_WRITE_EVENT_TYPE, V_EVENT_WRITE_EVENT_TYPE_CS_PARTIAL_FLUSH)
      .set(EVENT_WRITE_EVENT_INDEX, V_EVENT_WRITE_EVENT_INDEX_PARTIAL_FLUSH)
      .d;
}

// --- SDMA packets ---

std::vector<uint32_t> sdma_copy(Gen gen, uint64_t dst, uint64_t src, uint64_t bytes) {
  using namespace sdma;
  return sdmap(COPY_LINEAR, 0, 7)
      .set(sdma::copy_count_field(gen), bytes - 1)
      .lo_hi(COPY_LINEAR_SRC_ADDR_LO_ALL, COPY_LINEAR_SRC_ADDR_HI_ALL, src)
      .lo_hi(COPY_LINEAR_DST_ADDR_LO_ALL, COPY_LINEAR_DST_ADDR_HI_ALL, dst)
      .d;
}

std::vector<uint32_t> sdma_fence(uint64_t va, uint32_t data) {
  using namespace sdma;
  return sdmap(FENCE, 0, 4)
      .set(FENCE_MTYPE_GFX10_12, 3)
      .lo_hi(FENCE_ADDR_LO_ALL, FENCE_ADDR_HI_ALL, va)
      .set(FENCE_DATA_ALL, data)
      .d;
}

std::vector<uint32_t> sdma_trap(uint32_t ctx) {
  return sdmap(sdma::TRAP, 0, 2).set(sdma::TRAP_INT_CONTEXT_ALL, ctx).d;
}

std::vector<uint32_t> sdma_poll(uint64_t va, uint32_t value, uint32_t mask = 0xffffffffu,
                                uint32_t func = sdma::V_POLL_REGMEM_FUNC_GREATER_EQUAL) {
  using namespace sdma;
  return sdmap(POLL_REGMEM, 0, 6)
      .set(POLL_REGMEM_FUNC_ALL, func)
      .set(POLL_REGMEM_MEM_POLL_ALL, 1)
      .lo_hi(POLL_REGMEM_ADDR_LO_ALL, POLL_REGMEM_ADDR_HI_ALL, va)
      .set(POLL_REGMEM_VALUE_ALL, value)
      .set(POLL_REGMEM_MASK_ALL, mask)
      .set(POLL_REGMEM_INTERVAL_ALL, 4)
      .set(POLL_REGMEM_RETRY_COUNT_ALL, 0xfff)
      .d;
}

std::vector<uint32_t> sdma_cond_exe(uint64_t va, uint32_t ref, uint32_t count) {
  using namespace sdma;
  return sdmap(COND_EXE, 0, 5)
      .lo_hi(COND_EXE_ADDR_LO_ALL, COND_EXE_ADDR_HI_ALL, va)
      .set(COND_EXE_REFERENCE_ALL, ref)
      .set(COND_EXE_EXEC_COUNT_ALL, count)
      .d;
}

std::vector<uint32_t> sdma_timestamp(uint64_t va) {
  using namespace sdma;
  return sdmap(TIMESTAMP, sub_op(TIMESTAMP), 3)
      .lo_hi(TIMESTAMP_ADDR_LO_ALL, TIMESTAMP_ADDR_HI_ALL, va)
      .d;
}

std::vector<uint32_t> sdma_write(uint64_t va, std::vector<uint32_t> data) {
  using namespace sdma;
  auto p = sdmap(WRITE_LINEAR, 0, 4 + uint32_t(data.size()))
               .lo_hi(WRITE_LINEAR_DST_ADDR_LO_ALL, WRITE_LINEAR_DST_ADDR_HI_ALL, va)
               .set(WRITE_LINEAR_COUNT_ALL, data.size() - 1);
  std::copy(data.begin(), data.end(), p.d.begin() + 4);
  return p.d;
}

std::vector<uint32_t> sdma_indirect(uint64_t va, uint32_t dwords) {
  using namespace sdma;
  return sdmap(INDIRECT, 0, 6)
      .lo_hi(INDIRECT_IB_BASE_LO_ALL, INDIRECT_IB_BASE_HI_ALL, va)
      .set(INDIRECT_IB_SIZE_ALL, dwords)
      .d;
}

std::vector<uint32_t> sdma_nops(uint32_t n) {  // n single-dword NOPs (header 0)
  return std::vector<uint32_t>(n, sdma::header(sdma::NOP, 0));
}

// ------------------------------------------------------------------------------------------
// A queue driven by hand: the ring, its read pointer, and a doorbell.

class Ring {
 public:
  Ring(Memory& mem, Engine& eng, QueueDesc::Type type, uint32_t id, uint64_t ring_bytes)
      : eng_(eng), type_(type), id_(id), ring_bytes_(ring_bytes), ring_(mem, ring_bytes),
        ctl_(mem, 64) {
    QueueDesc d;
    d.type = type;
    d.id = id;
    d.ring_va = ring_.va();
    d.ring_bytes = ring_bytes;
    d.rptr_va = ctl_.va(0);
    d.wptr_va = ctl_.va(8);
    d.doorbell = &doorbell_;
    eng_.add_queue(d);
  }
  ~Ring() {
    if (attached_) eng_.remove_queue(id_);
  }
  void detach() { attached_ = false; }  // the engine is gone; keep the memory alive
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  // Appends dwords at the write pointer (wrapping for PM4; SDMA callers pad themselves).
  void write(const std::vector<uint32_t>& dw) {
    const uint64_t n = ring_bytes_ / 4;
    for (uint32_t v : dw) ring_.at<uint32_t>()[(wdw_++) % n] = v;
  }
  void ring_doorbell() {
    uint64_t w = type_ == QueueDesc::Type::Pm4 ? wdw_ : wdw_ * 4;
    __atomic_store_n(ctl_.at<uint64_t>(8), w, __ATOMIC_RELEASE);
    __atomic_store_n(&doorbell_, w, __ATOMIC_RELEASE);
    eng_.kick();
  }
  void submit(const std::vector<uint32_t>& dw) {
    write(dw);
    ring_doorbell();
  }
  uint64_t rptr() const { return load(ctl_.at<uint64_t>(0)); }
  uint64_t wptr() const { return type_ == QueueDesc::Type::Pm4 ? wdw_ : wdw_ * 4; }
  bool drained() {
    return eventually([&] { return rptr() == wptr(); });
  }
  uint64_t wdw() const { return wdw_; }
  uint32_t* ring_dw() const { return ring_.at<uint32_t>(); }

 private:
  Engine& eng_;
  QueueDesc::Type type_;
  uint32_t id_;
  uint64_t ring_bytes_;
  bool attached_ = true;
  Buf ring_, ctl_;
  uint64_t wdw_ = 0;
  volatile uint64_t doorbell_ = 0;
};

struct EngineTest : ::testing::Test {
  Memory mem;
  Events ev;
  Gen gen = Gen::Gfx11;
  std::unique_ptr<Engine> eng = std::make_unique<Engine>(gen, mem, ev);
  Buf data{mem, 1 << 16};

  void use_gen(Gen g) {
    gen = g;
    eng = std::make_unique<Engine>(g, mem, ev);
  }
};

// ------------------------------------------------------------------------------------------
// Memory

TEST(EmuMemory, TranslateChecksWholeRangeInOneMapping) {
  Memory m;
  m.map(0x10000, 0x1000);
  m.map(0x11000, 0x1000);  // adjacent
  EXPECT_EQ(m.translate(0x10000, 0x1000), reinterpret_cast<void*>(0x10000));
  EXPECT_EQ(m.translate(0x10ff0, 0x10), reinterpret_cast<void*>(0x10ff0));
  EXPECT_EQ(m.translate(0x10800, 0), reinterpret_cast<void*>(0x10800));  // zero size, mapped
  EXPECT_THROW(m.translate(0x10ff0, 0x11), Fault);                      // spans two mappings
  EXPECT_THROW(m.translate(0x12000, 0), Fault);                         // zero size, unmapped
  EXPECT_THROW(m.translate(0xfff0, 0x20), Fault);
  EXPECT_THROW(m.translate(0x10010, ~uint64_t{0}), Fault);  // va + size wraps
  try {
    m.translate(0x20000, 4);
    FAIL();
  } catch (const Fault& f) {
    EXPECT_EQ(f.address(), 0x20000u);
  }
  EXPECT_EQ(m.mapping_of(0x11fff), (std::pair<uint64_t, uint64_t>{0x11000, 0x1000}));
  EXPECT_EQ(m.mapping_of(0x12000), (std::pair<uint64_t, uint64_t>{0, 0}));
  EXPECT_THROW(m.map(0x10800, 0x1000), hcq::Error);  // overlap
  m.unmap(0x11000);
  EXPECT_THROW(m.translate(0x11000, 4), Fault);
  EXPECT_THROW(m.unmap(0x11000), hcq::Error);
}

// ------------------------------------------------------------------------------------------
// PM4

TEST_F(EngineTest, ReleaseMemWritesAndInterrupts) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  uint64_t before = eng->timestamp();
  *data.at<uint64_t>(0x18) = 0xdeadbeefdeadbeefull;
  r.submit(cat({acquire_mem(gen), event_write_cs_partial_flush(),
                release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, pm4::V_RELEASE_MEM_INT_SEL_NONE, data.va(0x10), 0x11223344aabbccddull),
                release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA, pm4::V_RELEASE_MEM_INT_SEL_NONE, data.va(0x20), 0x1122334455667788ull),
                release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_GPU_CLOCK_COUNTER, pm4::V_RELEASE_MEM_INT_SEL_NONE, data.va(0x28), 0),
                release_mem(pm4::V_RELEASE_MEM_DATA_SEL_NONE, pm4::V_RELEASE_MEM_INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM, 0, 0, 77),
                release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, pm4::V_RELEASE_MEM_INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM, data.va(0x30), 5, 78)}));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x10), 0xaabbccddu);
  EXPECT_EQ(*data.at<uint32_t>(0x14), 0u);  // 32-bit write only
  EXPECT_EQ(*data.at<uint64_t>(0x20), 0x1122334455667788ull);
  uint64_t ts = *data.at<uint64_t>(0x28);
  EXPECT_GE(ts, before);
  EXPECT_LE(ts, eng->timestamp());
  EXPECT_EQ(*data.at<uint32_t>(0x30), 5u);
  ASSERT_TRUE(ev.wait_irqs(2));
  std::lock_guard lk(ev.mu);
  EXPECT_EQ(ev.irqs, (std::vector<uint32_t>{77, 78}));
  EXPECT_TRUE(ev.faults.empty());
}

TEST_F(EngineTest, TimestampIs100MHzAndMonotonic) {
  uint64_t a = eng->timestamp();
  std::this_thread::sleep_for(2ms);
  uint64_t b = eng->timestamp();
  EXPECT_GE(b - a, 200'000u);  // >= 2 ms at 100 ticks per µs
  EXPECT_LT(b - a, 100'000'000u);
}

TEST_F(EngineTest, WaitRegMemBlocksUntilValue) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  r.submit(cat({wait_mem(data.va(0x40), 3), release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x44), 9)}));
  __atomic_store_n(data.at<uint32_t>(0x40), 2, __ATOMIC_RELEASE);
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(load(data.at<uint32_t>(0x44)), 0u);
  EXPECT_EQ(r.rptr(), 0u);  // still at the wait
  __atomic_store_n(data.at<uint32_t>(0x40), 3, __ATOMIC_RELEASE);
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x44), 9u);
}

TEST_F(EngineTest, WaitRegMem64AcrossThe32BitBoundary) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  auto* sig = data.at<uint64_t>(0x40);
  __atomic_store_n(sig, 0xFFFFFFFFull, __ATOMIC_RELEASE);
  r.submit(cat({wait_mem64(data.va(0x40), 0x100000002ull),
                release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA, 0, data.va(0x48), 0x5555)}));
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(load(data.at<uint64_t>(0x48)), 0u);  // 0xFFFFFFFF < 0x1_0000_0002
  __atomic_store_n(sig, 0x100000001ull, __ATOMIC_RELEASE);
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(load(data.at<uint64_t>(0x48)), 0u);
  std::thread writer([&] { __atomic_store_n(sig, 0x100000002ull, __ATOMIC_RELEASE); });
  writer.join();
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint64_t>(0x48), 0x5555u);
}

// The gfx9 MEC runs what Linux's gfx9 code emits: WAIT_REG_MEM64 (Linux nvd.h, gfx10-gfx12)
// is an unknown opcode there, so an encoder that emitted it on gfx9 fails every test.
TEST_F(EngineTest, WaitRegMem64IsNotAGfx9Packet) {
  use_gen(Gen::Gfx9);
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 3, 4096);
  r.submit(wait_mem64(data.va(0x40), 1));
  auto f = ev.wait_fault();
  EXPECT_EQ(f.what, "compute queue 3: unknown PM4 opcode 0x93 at ring offset 0x0 (header "
                    "0xC0079300): WAIT_REG_MEM64 is not a gfx9 packet");
}

// gfx10.3 likewise (pm4.def: no public source shows its MEC running WAIT_REG_MEM64).
TEST_F(EngineTest, WaitRegMem64IsNotAGfx10Packet) {
  use_gen(Gen::Gfx10);
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 3, 4096);
  r.submit(wait_mem64(data.va(0x40), 1));
  auto f = ev.wait_fault();
  EXPECT_EQ(f.what, "compute queue 3: unknown PM4 opcode 0x93 at ring offset 0x0 (header "
                    "0xC0079300): WAIT_REG_MEM64 is not a gfx10 packet");
}

// The bytes the gfx9 encoder emits for a 64-bit wait (high word, then low word, 32-bit
// WAIT_REG_MEMs) run on the emulated gfx9 MEC: a low word that is already past L while the
// high word is below H does not pass, across 2^32.
TEST_F(EngineTest, Gfx9EncoderWaitHoldsAcrossThe32BitBoundary) {
  use_gen(Gen::Gfx9);
  Pm4Encoder enc(Gen::Gfx9, {});
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  auto* sig = data.at<uint64_t>(0x40);
  __atomic_store_n(sig, 0xFFFFFFF0ull, __ATOMIC_RELEASE);
  CommandStream cs;
  std::vector<PatchSite> sites;
  enc.wait(cs, data.va(0x40), 0x100000010ull, sites);
  r.submit(cat({{cs.data(), cs.data() + cs.size()},
                release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA, 0, data.va(0x48), 0x5555)}));
  for (uint64_t v : {0xFFFFFFF0ull, 0xFFFFFFFFull, 0x100000000ull, 0x10000000Full}) {
    __atomic_store_n(sig, v, __ATOMIC_RELEASE);
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(load(data.at<uint64_t>(0x48)), 0u) << std::hex << v;
  }
  __atomic_store_n(sig, 0x100000010ull, __ATOMIC_RELEASE);
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint64_t>(0x48), 0x5555u);
  EXPECT_EQ(ev.fault_count(), 0u);
}

// Two gfx9 queues take turns on one 64-bit timeline from 0xFFFFFFF0 past 0x1_0000_0010, each
// waiting (encoder bytes) for the other's last value before signalling the next: every wait
// must pass in order, or a turn is skipped and the timeline never reaches its end value.
TEST_F(EngineTest, Gfx9EncoderWaitsOrderATimelineAcross2To32) {
  use_gen(Gen::Gfx9);
  Pm4Encoder enc(Gen::Gfx9, {});
  const uint64_t base = 0xFFFFFFF0ull, turns = 20;  // ends at 0x1_0000_0018
  auto* sig = data.at<uint64_t>(0x40);
  __atomic_store_n(sig, base, __ATOMIC_RELEASE);
  CommandStream a, b;
  std::vector<PatchSite> sites;
  for (uint64_t i = 0; i < turns; i++) {
    enc.wait(a, data.va(0x40), base + 2 * i, sites);
    enc.signal(a, data.va(0x40), base + 2 * i + 1, false, sites);
    enc.wait(b, data.va(0x40), base + 2 * i + 1, sites);
    enc.signal(b, data.va(0x40), base + 2 * i + 2, false, sites);
  }
  Ring ra(mem, *eng, QueueDesc::Type::Pm4, 1, 4096), rb(mem, *eng, QueueDesc::Type::Pm4, 2, 4096);
  rb.submit({b.data(), b.data() + b.size()});
  ra.submit({a.data(), a.data() + a.size()});
  ASSERT_TRUE(ra.drained());
  ASSERT_TRUE(rb.drained());
  EXPECT_EQ(*sig, base + 2 * turns);
  EXPECT_EQ(ev.fault_count(), 0u);
}

// The documented limit of the two-poll wait: a value that has already moved past the next
// multiple of 2^32 when the low-word poll runs (0xFFFFFFF8 awaited, 0x1_0000_0010 seen)
// stalls that poll; the high-word poll alone passes.
TEST_F(EngineTest, Gfx9EncoderWaitStallsWhenTheValueOvershootsAMultipleOf2To32) {
  use_gen(Gen::Gfx9);
  Pm4Encoder enc(Gen::Gfx9, {});
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  __atomic_store_n(data.at<uint64_t>(0x40), 0x100000010ull, __ATOMIC_RELEASE);
  CommandStream cs;
  std::vector<PatchSite> sites;
  enc.wait(cs, data.va(0x40), 0xFFFFFFF8ull, sites);
  r.submit({cs.data(), cs.data() + cs.size()});
  EXPECT_TRUE(eventually([&] { return r.rptr() == 7; }));  // past the high-word poll
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(r.rptr(), 7u);  // held at the low-word poll
  __atomic_store_n(data.at<uint64_t>(0x40), 0x1FFFFFFF8ull, __ATOMIC_RELEASE);
  ASSERT_TRUE(r.drained());
}

TEST_F(EngineTest, BlockedQueueDoesNotBlockOthers) {
  Ring a(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  Ring b(mem, *eng, QueueDesc::Type::Pm4, 2, 4096);
  a.submit(cat({wait_mem(data.va(0x40), 1), release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x44), 1)}));
  b.submit(release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x48), 2));
  ASSERT_TRUE(b.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x48), 2u);
  EXPECT_EQ(load(data.at<uint32_t>(0x44)), 0u);
  __atomic_store_n(data.at<uint32_t>(0x40), 1, __ATOMIC_RELEASE);
  ASSERT_TRUE(a.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x44), 1u);
}

TEST_F(EngineTest, Pm4PacketsWrapAroundTheRingEnd) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 256);  // 64 dwords
  // 60 dwords of NOP, then an 8-dword RELEASE_MEM that straddles the end (4 + 4 dwords).
  r.submit(pm4_nop(59));
  ASSERT_TRUE(r.drained());
  r.submit(release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA, 0, data.va(0x50), 0xabcdef0123ull));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(r.rptr(), 68u);
  EXPECT_EQ(*data.at<uint64_t>(0x50), 0xabcdef0123ull);
  // Type-2 fillers and a header-only NOP (count 0x3FFF) are one dword each.
  r.submit({0x80000000u, pm4::header(pm4::NOP, 0x4000), 0x80000000u});
  r.submit(release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x58), 7));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x58), 7u);
  EXPECT_EQ(ev.fault_count(), 0u);
}

// The engine's memory, remembering the largest range translated inside a watched ring.
class WatchedMemory final : public GpuAddressSpace {
 public:
  explicit WatchedMemory(Memory& m) : m_(m) {}
  void* translate(uint64_t va, uint64_t size) const override {
    if (va >= watch_va.load() && va - watch_va.load() < watch_bytes.load() && size > largest.load())
      largest.store(size);
    return m_.translate(va, size);
  }
  std::pair<uint64_t, uint64_t> mapping_of(uint64_t va) const override { return m_.mapping_of(va); }
  void watch(const uint32_t* ring, uint64_t bytes) {
    watch_va = reinterpret_cast<uint64_t>(ring);
    watch_bytes = bytes;
    largest = 0;
  }
  std::atomic<uint64_t> watch_va{0}, watch_bytes{0};
  mutable std::atomic<uint64_t> largest{0};  // written by the engine's thread only

 private:
  Memory& m_;
};

TEST_F(EngineTest, AStepTranslatesOnlyTheSubmittedPartOfTheRing) {
  WatchedMemory watched(mem);
  Engine engine(gen, watched, ev);
  constexpr uint64_t kRingBytes = 1 << 20;
  {
    Ring r(mem, engine, QueueDesc::Type::Pm4, 1, kRingBytes);
    watched.watch(r.ring_dw(), kRingBytes);  // add_queue checked all of it once
    const auto pkt = release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x10), 5);
    r.submit(pkt);
    ASSERT_TRUE(r.drained());
    EXPECT_EQ(*data.at<uint32_t>(0x10), 5u);
    EXPECT_EQ(watched.largest.load(), pkt.size() * 4);
  }
  {
    Ring r(mem, engine, QueueDesc::Type::Sdma, 2, kRingBytes);
    watched.watch(r.ring_dw(), kRingBytes);
    const auto pkt = sdma_fence(data.va(0x20), 6);
    r.submit(pkt);
    ASSERT_TRUE(r.drained());
    EXPECT_EQ(*data.at<uint32_t>(0x20), 6u);
    EXPECT_EQ(watched.largest.load(), pkt.size() * 4);
  }
  EXPECT_EQ(ev.fault_count(), 0u);
}

TEST_F(EngineTest, Pm4PartlySubmittedPacketWaits) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  auto pkt = release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x60), 3);
  r.submit(std::vector<uint32_t>(pkt.begin(), pkt.begin() + 4));
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(r.rptr(), 0u);
  r.submit(std::vector<uint32_t>(pkt.begin() + 4, pkt.end()));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x60), 3u);
}

TEST_F(EngineTest, IndirectBuffersNestTwoLevelsAndResumeAWait) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  Buf ib1(mem, 4096), ib2(mem, 4096);
  auto inner = cat({release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x70), 1), wait_mem(data.va(0x80), 1),
                    release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x74), 2)});
  std::memcpy(ib2.at(), inner.data(), inner.size() * 4);
  auto outer = cat({indirect_buffer(ib2.va(), uint32_t(inner.size())),
                    release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x78), 3)});
  std::memcpy(ib1.at(), outer.data(), outer.size() * 4);
  r.submit(cat({indirect_buffer(ib1.va(), uint32_t(outer.size())),
                release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x7c), 4)}));
  ASSERT_TRUE(eventually([&] { return load(data.at<uint32_t>(0x70)) == 1; }));
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(r.rptr(), 0u);  // the ring's IB packet completes when its IB does
  EXPECT_EQ(load(data.at<uint32_t>(0x74)), 0u);
  __atomic_store_n(data.at<uint32_t>(0x80), 1, __ATOMIC_RELEASE);
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x74), 2u);
  EXPECT_EQ(*data.at<uint32_t>(0x78), 3u);
  EXPECT_EQ(*data.at<uint32_t>(0x7c), 4u);
  EXPECT_EQ(ev.fault_count(), 0u);
}

TEST_F(EngineTest, ChainedIndirectBufferDoesNotReturn) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  Buf ib1(mem, 4096), ib2(mem, 4096);
  auto second = release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x90), 2);
  std::memcpy(ib2.at(), second.data(), second.size() * 4);
  auto first = cat({release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x94), 1),
                    indirect_buffer(ib2.va(), uint32_t(second.size()), /*chain=*/true),
                    release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x98), 99)});  // never runs
  std::memcpy(ib1.at(), first.data(), first.size() * 4);
  r.submit(cat({indirect_buffer(ib1.va(), uint32_t(first.size())),
                release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x9c), 3)}));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x94), 1u);
  EXPECT_EQ(*data.at<uint32_t>(0x90), 2u);
  EXPECT_EQ(*data.at<uint32_t>(0x98), 0u);
  EXPECT_EQ(*data.at<uint32_t>(0x9c), 3u);
}

TEST_F(EngineTest, ThirdIndirectBufferLevelFaults) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 4, 4096);
  Buf ib(mem, 4096);
  auto b3 = pm4_nop(0);
  auto b2 = indirect_buffer(ib.va(0x200), uint32_t(b3.size()));
  auto b1 = indirect_buffer(ib.va(0x100), uint32_t(b2.size()));
  std::memcpy(ib.at(0x000), b1.data(), b1.size() * 4);
  std::memcpy(ib.at(0x100), b2.data(), b2.size() * 4);
  std::memcpy(ib.at(0x200), b3.data(), b3.size() * 4);
  r.submit(indirect_buffer(ib.va(), uint32_t(b1.size())));
  auto f = ev.wait_fault();
  EXPECT_EQ(f.queue, 4u);
  EXPECT_FALSE(f.memory);
  EXPECT_EQ(f.what, "compute queue 4: INDIRECT_BUFFER at IB 0x" +
                        (std::stringstream() << std::hex << ib.va(0x100)).str() +
                        " offset 0x0 nests deeper than 2 levels");
}

TEST_F(EngineTest, PacketRunningPastIbEndFaults) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  Buf ib(mem, 4096);
  auto pkt = release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0), 1);
  std::memcpy(ib.at(), pkt.data(), pkt.size() * 4);
  r.submit(indirect_buffer(ib.va(), 5));
  auto f = ev.wait_fault();
  EXPECT_NE(f.what.find("runs past the end of the IB"), std::string::npos) << f.what;
}

TEST_F(EngineTest, UnknownOpcodeFaultsWithExactMessage) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 3, 4096);
  r.submit(cat({pm4_nop(15), {0xC0009900u, 0}, release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0), 1)}));
  auto f = ev.wait_fault();
  EXPECT_EQ(f.queue, 3u);
  EXPECT_FALSE(f.memory);
  EXPECT_EQ(f.what, "compute queue 3: unknown PM4 opcode 0x99 at ring offset 0x40 (header 0xC0009900)");
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(r.rptr(), 16u);  // stopped at the bad packet, nothing after it ran
  EXPECT_EQ(load(data.at<uint32_t>(0)), 0u);
  // The queue stays dead.
  r.submit(release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(4), 1));
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(load(data.at<uint32_t>(4)), 0u);
  EXPECT_EQ(ev.fault_count(), 1u);
}

TEST_F(EngineTest, WrongLengthAndType0PacketsFault) {
  {
    Ring r(mem, *eng, QueueDesc::Type::Pm4, 5, 4096);
    auto p = release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0), 1);
    p.pop_back();
    p[0] = pm4::header(pm4::RELEASE_MEM, 6);
    r.submit(p);
    auto f = ev.wait_fault();
    EXPECT_EQ(f.what, "compute queue 5: PM4 RELEASE_MEM at ring offset 0x0 has 6 body dwords; "
                      "expected 7 on gfx11");
  }
  ev.clear();
  {
    Ring r(mem, *eng, QueueDesc::Type::Pm4, 6, 4096);
    r.submit({0x00001234u});
    auto f = ev.wait_fault();
    EXPECT_EQ(f.queue, 6u);
    EXPECT_EQ(f.what, "compute queue 6: PM4 type-0 packet at ring offset 0x0 (header 0x00001234): "
                      "only type-3 packets are supported");
  }
}

TEST_F(EngineTest, AcquireMemLengthDependsOnGeneration) {
  use_gen(Gen::Gfx9);
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  r.submit(cat({acquire_mem(Gen::Gfx9), release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0), 1)}));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0), 1u);
  r.submit(acquire_mem(Gen::Gfx11));  // 7 body dwords: wrong on gfx9
  auto f = ev.wait_fault();
  EXPECT_NE(f.what.find("ACQUIRE_MEM at ring offset 0x"), std::string::npos) << f.what;
  EXPECT_NE(f.what.find("expected 6 on gfx9"), std::string::npos) << f.what;
}

TEST_F(EngineTest, UnmappedReleaseMemAddressIsAMemoryFault) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 2, 4096);
  const uint64_t bad = 0x7a0000001000ull;
  r.submit(release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA, pm4::V_RELEASE_MEM_INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM, bad, 1, 5));
  auto f = ev.wait_fault();
  EXPECT_EQ(f.queue, 2u);
  EXPECT_TRUE(f.memory);
  EXPECT_EQ(f.address, bad);
  EXPECT_EQ(f.what.rfind("compute queue 2: RELEASE_MEM at ring offset 0x0: GPU address 0x7a0000001000", 0),
            0u)
      << f.what;
  std::lock_guard lk(ev.mu);
  EXPECT_TRUE(ev.irqs.empty());  // no interrupt for a write that failed
}

TEST_F(EngineTest, MisalignedReleaseMemAddressFaults) {
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 2, 4096);
  r.submit(release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA, 0, data.va(4), 1));
  auto f = ev.wait_fault();
  EXPECT_TRUE(f.memory);
  EXPECT_EQ(f.address, data.va(4));
  EXPECT_NE(f.what.find("not 8-byte aligned"), std::string::npos) << f.what;
}

// --- Dispatch: a minimal AMDHSA code object built by hand ---

constexpr uint16_t kEmAmdgpu = 224;
constexpr uint32_t kKdOff = 0x300, kCodeOff = 0x400, kImageBytes = 0x500;

// ELF64 shared object, loaded at vaddr 0: header, PT_LOAD + PT_DYNAMIC, a DT_HASH/DT_SYMTAB/
// DT_STRTAB dynamic symbol table with "<name>" (code) and "<name>.kd" (64-byte descriptor).
std::vector<std::byte> make_code_object(const std::string& name, uint32_t kernarg_size,
                                        uint16_t code_properties) {
  std::vector<std::byte> img(kImageBytes);
  auto put = [&](uint64_t off, const auto& v) { std::memcpy(img.data() + off, &v, sizeof v); };
  constexpr uint64_t kPh = 0x40, kDyn = 0x100, kHash = 0x180, kSym = 0x1c0, kStr = 0x240;

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_ident[EI_OSABI] = 64;      // ELFOSABI_AMDGPU_HSA
  eh.e_ident[EI_ABIVERSION] = 3;  // code object v5
  eh.e_type = ET_DYN;
  eh.e_machine = kEmAmdgpu;
  eh.e_version = EV_CURRENT;
  eh.e_flags = 0x41;  // EF_AMDGPU_MACH_AMDGCN_GFX1100
  eh.e_phoff = kPh;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 2;
  put(0, eh);

  Elf64_Phdr load{};
  load.p_type = PT_LOAD;
  load.p_flags = PF_R | PF_X;
  load.p_filesz = load.p_memsz = kImageBytes;
  load.p_align = 0x1000;
  put(kPh, load);
  Elf64_Phdr dyn{};
  dyn.p_type = PT_DYNAMIC;
  dyn.p_flags = PF_R;
  dyn.p_offset = dyn.p_vaddr = kDyn;
  dyn.p_filesz = dyn.p_memsz = 7 * sizeof(Elf64_Dyn);
  dyn.p_align = 8;
  put(kPh + sizeof(Elf64_Phdr), dyn);

  const std::string strtab = std::string("\0", 1) + name + '\0' + name + ".kd" + '\0';
  std::memcpy(img.data() + kStr, strtab.data(), strtab.size());

  const Elf64_Dyn dyns[] = {{DT_HASH, {kHash}},   {DT_STRTAB, {kStr}},
                            {DT_SYMTAB, {kSym}},  {DT_STRSZ, {strtab.size()}},
                            {DT_SYMENT, {sizeof(Elf64_Sym)}}, {DT_NULL, {0}}};
  std::memcpy(img.data() + kDyn, dyns, sizeof dyns);

  // nbucket 1, nchain 3: bucket[0] -> 2 -> 1 -> end.
  const uint32_t hash[] = {1, 3, 2, 0, 0, 1};
  std::memcpy(img.data() + kHash, hash, sizeof hash);

  Elf64_Sym syms[3]{};
  syms[1].st_name = 1;
  syms[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
  syms[1].st_shndx = 1;
  syms[1].st_value = kCodeOff;
  syms[1].st_size = 4;
  syms[2].st_name = uint32_t(2 + name.size());
  syms[2].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
  syms[2].st_shndx = 1;
  syms[2].st_value = kKdOff;
  syms[2].st_size = 64;
  std::memcpy(img.data() + kSym, syms, sizeof syms);

  // Kernel descriptor (AMDHSAKernelDescriptor.h offsets).
  put(kKdOff + 8, kernarg_size);
  put(kKdOff + 16, int64_t{kCodeOff} - int64_t{kKdOff});
  put(kKdOff + 52, uint32_t{4u << 1});  // COMPUTE_PGM_RSRC2.USER_SGPR = 4
  put(kKdOff + 56, code_properties);
  put(kCodeOff, uint32_t{0xBFB00000});  // s_endpgm
  return img;
}

struct Seen {
  std::mutex mu;
  std::vector<hcq::emu::Dispatch> calls;
  std::vector<std::vector<std::byte>> args;
};

std::vector<uint32_t> launch(uint64_t code_va, uint64_t kernargs, Dim3 block, Dim3 grid) {
  using namespace regs;
  return cat({set_sh_reg(COMPUTE_PGM_LO_ALL.address,
                         {uint32_t(code_va >> 8), uint32_t(code_va >> 40)}),
              set_sh_reg(COMPUTE_NUM_THREAD_X_ALL.address, {block.x, block.y, block.z}),
              // dispatch ptr in s[0:1] (unused here), kernarg ptr in s[2:3]
              set_sh_reg(COMPUTE_USER_DATA_0_ALL.address,
                         {0xdead, 0xbeef, uint32_t(kernargs), uint32_t(kernargs >> 32)}),
              dispatch_direct(grid.x, grid.y, grid.z)});
}

constexpr uint16_t kDispatchPtr = 1u << 1, kKernargPtr = 1u << 3;

TEST_F(EngineTest, DispatchRunsTheRegisteredCpuKernel) {
  Seen seen;
  hcq::emu::register_kernel("engine_test_add", [&](const hcq::emu::Dispatch& d) {
    uint64_t out = d.arg<uint64_t>(0);
    uint32_t add = d.arg<uint32_t>(8);
    uint32_t* p = d.ptr<uint32_t>(out, d.threads());
    for (uint64_t i = 0; i < d.threads(); i++) p[i] = uint32_t(i) + add;
    std::lock_guard lk(seen.mu);
    seen.calls.push_back(d);
    seen.args.emplace_back(d.kernargs, d.kernargs + d.kernarg_size);
  });
  Buf code(mem, 0x1000, 0x1000);
  auto img = make_code_object("engine_test_add", 16, kDispatchPtr | kKernargPtr);
  std::memcpy(code.at(), img.data(), img.size());
  Buf args(mem, 256), out(mem, 4096);
  *args.at<uint64_t>(0) = out.va();
  *args.at<uint32_t>(8) = 1000;

  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  for (int rep = 0; rep < 2; rep++) {  // the second goes through the kernel cache
    r.submit(cat({launch(code.va(kCodeOff), args.va(), {4, 2, 1}, {3, 1, 2}),
                  event_write_cs_partial_flush(),
                  release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x100 + 4 * rep), 1)}));
    ASSERT_TRUE(r.drained());
    ASSERT_EQ(*data.at<uint32_t>(0x100 + 4 * rep), 1u);
  }
  ASSERT_EQ(ev.fault_count(), 0u) << ev.faults[0].what;
  std::lock_guard lk(seen.mu);
  ASSERT_EQ(seen.calls.size(), 2u);
  EXPECT_EQ(seen.calls[0].grid, (Dim3{3, 1, 2}));
  EXPECT_EQ(seen.calls[0].block, (Dim3{4, 2, 1}));
  EXPECT_EQ(seen.calls[0].kernarg_size, 16u);
  EXPECT_EQ(seen.calls[0].memory, &mem);
  EXPECT_EQ(std::memcmp(seen.args[0].data(), args.at(), 16), 0);
  for (uint32_t i = 0; i < 48; i++) EXPECT_EQ(out.at<uint32_t>()[i], 1000 + i);
  EXPECT_EQ(out.at<uint32_t>()[48], 0u);
}

TEST_F(EngineTest, DispatchWithoutCpuImplementationFaults) {
  Buf code(mem, 0x1000, 0x1000);
  auto img = make_code_object("engine_test_unregistered", 0, kKernargPtr);
  std::memcpy(code.at(), img.data(), img.size());
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 7, 4096);
  r.submit(launch(code.va(kCodeOff), 0, {1, 1, 1}, {1, 1, 1}));
  auto f = ev.wait_fault();
  EXPECT_EQ(f.queue, 7u);
  EXPECT_NE(f.what.find("no CPU implementation registered for kernel 'engine_test_unregistered'"),
            std::string::npos)
      << f.what;
}

TEST_F(EngineTest, DispatchAtAnAddressWithoutKernelFaults) {
  Buf code(mem, 0x1000, 0x1000);
  auto img = make_code_object("engine_test_k", 0, kKernargPtr);
  std::memcpy(code.at(), img.data(), img.size());
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 7, 4096);
  r.submit(launch(code.va(0x100), 0, {1, 1, 1}, {1, 1, 1}));
  auto f = ev.wait_fault();
  EXPECT_NE(f.what.find((std::stringstream() << "no kernel at 0x" << std::hex << code.va(0x100)).str()),
            std::string::npos)
      << f.what;
}

TEST_F(EngineTest, KernelFaultsBecomeQueueFaults) {
  hcq::emu::register_kernel("engine_test_oob", [](const hcq::emu::Dispatch& d) {
    d.ptr<uint32_t>(0x10, 1)[0] = 1;  // unmapped
  });
  hcq::emu::register_kernel("engine_test_throws",
                            [](const hcq::emu::Dispatch&) { throw std::runtime_error("boom"); });
  Buf code1(mem, 0x1000, 0x1000), code2(mem, 0x1000, 0x1000), args(mem, 256);
  auto img1 = make_code_object("engine_test_oob", 8, kDispatchPtr | kKernargPtr);
  auto img2 = make_code_object("engine_test_throws", 8, kDispatchPtr | kKernargPtr);
  std::memcpy(code1.at(), img1.data(), img1.size());
  std::memcpy(code2.at(), img2.data(), img2.size());
  Ring r1(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  r1.submit(launch(code1.va(kCodeOff), args.va(), {1, 1, 1}, {1, 1, 1}));
  auto f = ev.wait_fault();
  EXPECT_TRUE(f.memory);
  EXPECT_EQ(f.address, 0x10u);
  EXPECT_NE(f.what.find("kernel 'engine_test_oob'"), std::string::npos) << f.what;
  ev.clear();
  Ring r2(mem, *eng, QueueDesc::Type::Pm4, 2, 4096);
  r2.submit(launch(code2.va(kCodeOff), args.va(), {1, 1, 1}, {1, 1, 1}));
  f = ev.wait_fault();
  EXPECT_EQ(f.queue, 2u);
  EXPECT_FALSE(f.memory);
  EXPECT_NE(f.what.find("kernel 'engine_test_throws'"), std::string::npos) << f.what;
  EXPECT_NE(f.what.find("boom"), std::string::npos) << f.what;
}

TEST_F(EngineTest, UnmappedKernargsFault) {
  hcq::emu::register_kernel("engine_test_noop", [](const hcq::emu::Dispatch&) {});
  Buf code(mem, 0x1000, 0x1000);
  auto img = make_code_object("engine_test_noop", 64, kKernargPtr);
  std::memcpy(code.at(), img.data(), img.size());
  Ring r(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  // Without the dispatch ptr the kernarg pointer is user SGPR 0: 0xdead | 0xbeef << 32.
  r.submit(launch(code.va(kCodeOff), 0, {1, 1, 1}, {1, 1, 1}));
  auto f = ev.wait_fault();
  EXPECT_TRUE(f.memory);
  EXPECT_EQ(f.address, 0xbeef0000deadull);
}

// ------------------------------------------------------------------------------------------
// SDMA

TEST_F(EngineTest, SdmaCopyLinearUnalignedSizes) {
  Ring r(mem, *eng, QueueDesc::Type::Sdma, 10, 4096);
  Buf src(mem, 8192), dst(mem, 8192);
  for (int i = 0; i < 8192; i++) src.at<uint8_t>()[i] = uint8_t(i * 7 + 3);
  struct C { uint64_t s, d, n; };
  const C copies[] = {{0, 0, 1}, {1, 17, 3}, {5, 33, 7}, {13, 100, 13}, {3, 2001, 4097}};
  for (auto& c : copies) r.write(sdma_copy(gen, dst.va(c.d), src.va(c.s), c.n));
  r.ring_doorbell();
  ASSERT_TRUE(r.drained());
  std::vector<uint8_t> expect(8192, 0);
  for (auto& c : copies)
    std::memcpy(expect.data() + c.d, src.at<uint8_t>() + c.s, c.n);
  EXPECT_EQ(std::memcmp(dst.at(), expect.data(), 8192), 0);
  EXPECT_EQ(ev.fault_count(), 0u);
}

TEST_F(EngineTest, SdmaCopyCountFieldIsPerGeneration) {
  use_gen(Gen::Gfx9);
  Ring r(mem, *eng, QueueDesc::Type::Sdma, 10, 4096);
  Buf src(mem, 4096), dst(mem, 4096);
  std::memset(src.at(), 0x5a, 4096);
  r.submit(sdma_copy(Gen::Gfx9, dst.va(), src.va(), 4096));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(dst.at<uint8_t>()[4095], 0x5a);
  EXPECT_EQ(ev.fault_count(), 0u);
}

TEST_F(EngineTest, SdmaFenceTrapTimestampWrite) {
  Ring r(mem, *eng, QueueDesc::Type::Sdma, 11, 4096);
  uint64_t before = eng->timestamp();
  r.submit(cat({sdma_write(data.va(0x200), {1, 2, 3}), sdma_fence(data.va(0x210), 0xfeedf00d),
                sdma_timestamp(data.va(0x218)), sdma_trap(42)}));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(data.at<uint32_t>(0x200)[0], 1u);
  EXPECT_EQ(data.at<uint32_t>(0x200)[1], 2u);
  EXPECT_EQ(data.at<uint32_t>(0x200)[2], 3u);
  EXPECT_EQ(data.at<uint32_t>(0x200)[3], 0u);
  EXPECT_EQ(*data.at<uint32_t>(0x210), 0xfeedf00du);
  EXPECT_GE(*data.at<uint64_t>(0x218), before);
  EXPECT_LE(*data.at<uint64_t>(0x218), eng->timestamp());
  ASSERT_TRUE(ev.wait_irqs(1));
  std::lock_guard lk(ev.mu);
  EXPECT_EQ(ev.irqs, (std::vector<uint32_t>{42}));
  EXPECT_TRUE(ev.faults.empty());
}

TEST_F(EngineTest, SdmaPollRegMemBlocks) {
  Ring r(mem, *eng, QueueDesc::Type::Sdma, 12, 4096);
  r.submit(cat({sdma_poll(data.va(0x300), 0x10, 0xf0), sdma_fence(data.va(0x304), 1)}));
  __atomic_store_n(data.at<uint32_t>(0x300), 0x0f, __ATOMIC_RELEASE);  // masked: 0x00
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(load(data.at<uint32_t>(0x304)), 0u);
  EXPECT_EQ(r.rptr(), 0u);
  __atomic_store_n(data.at<uint32_t>(0x300), 0x1f, __ATOMIC_RELEASE);  // masked: 0x10
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x304), 1u);
}

TEST_F(EngineTest, SdmaCondExe) {
  Ring r(mem, *eng, QueueDesc::Type::Sdma, 13, 4096);
  *data.at<uint32_t>(0x400) = 1;
  auto f1 = sdma_fence(data.va(0x404), 11), f2 = sdma_fence(data.va(0x408), 22);
  r.submit(cat({sdma_cond_exe(data.va(0x400), 1, uint32_t(f1.size())), f1,   // runs
                sdma_cond_exe(data.va(0x400), 2, uint32_t(f2.size())), f2,   // skipped
                sdma_fence(data.va(0x40c), 33)}));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x404), 11u);
  EXPECT_EQ(*data.at<uint32_t>(0x408), 0u);
  EXPECT_EQ(*data.at<uint32_t>(0x40c), 33u);
  // The same inside an IB.
  Buf ib(mem, 4096);
  auto body = cat({sdma_cond_exe(data.va(0x400), 1, 4), sdma_fence(data.va(0x410), 44),
                   sdma_cond_exe(data.va(0x400), 0, 4), sdma_fence(data.va(0x414), 55),
                   sdma_nops(6)});
  std::memcpy(ib.at(), body.data(), body.size() * 4);
  r.submit(cat({sdma_indirect(ib.va(), uint32_t(body.size())), sdma_fence(data.va(0x418), 66)}));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(*data.at<uint32_t>(0x410), 44u);
  EXPECT_EQ(*data.at<uint32_t>(0x414), 0u);
  EXPECT_EQ(*data.at<uint32_t>(0x418), 66u);
  EXPECT_EQ(ev.fault_count(), 0u);
}

TEST_F(EngineTest, SdmaNopPaddingAtRingEnd) {
  Ring r(mem, *eng, QueueDesc::Type::Sdma, 14, 256);  // 64 dwords
  // 58 dwords of fences and a multi-dword NOP, then 6 single NOPs pad to the end; the fence
  // after them starts again at offset 0 (the byte counter keeps counting up).
  std::vector<uint32_t> head;
  for (int i = 0; i < 12; i++) {
    auto f = sdma_fence(data.va(0x500 + 4 * i), i + 1);
    head.insert(head.end(), f.begin(), f.end());
  }
  head.push_back(sdma::header(sdma::NOP, 0) | sdma::NOP_COUNT_ALL(9));
  head.insert(head.end(), 9, 0xcafe);  // skipped payload
  r.submit(cat({head, sdma_nops(6)}));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(r.rptr(), 256u);
  r.submit(sdma_fence(data.va(0x540), 99));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(r.rptr(), 272u);
  for (int i = 0; i < 12; i++) EXPECT_EQ(data.at<uint32_t>(0x500)[i], uint32_t(i + 1));
  EXPECT_EQ(*data.at<uint32_t>(0x540), 99u);
  EXPECT_EQ(ev.fault_count(), 0u);
}

TEST_F(EngineTest, SdmaPacketCrossingRingEndFaults) {
  Ring r(mem, *eng, QueueDesc::Type::Sdma, 15, 256);
  r.submit(sdma_nops(62));
  ASSERT_TRUE(r.drained());
  r.submit(sdma_fence(data.va(0), 1));  // 62 + 4 > 64
  auto f = ev.wait_fault();
  EXPECT_EQ(f.queue, 15u);
  EXPECT_EQ(f.what, "copy queue 15: SDMA packet (header 0x00030005) at ring offset 0xf8 crosses "
                    "the ring end (4 dwords, 2 left before the end)");
}

TEST_F(EngineTest, SdmaIndirect) {
  Ring r(mem, *eng, QueueDesc::Type::Sdma, 16, 4096);
  Buf ib(mem, 4096);
  auto body = cat({sdma_write(data.va(0x600), {7, 8}), sdma_fence(data.va(0x608), 9)});
  std::memcpy(ib.at(), body.data(), body.size() * 4);
  r.submit(cat({sdma_indirect(ib.va(), uint32_t(body.size())), sdma_fence(data.va(0x60c), 10)}));
  ASSERT_TRUE(r.drained());
  EXPECT_EQ(data.at<uint32_t>(0x600)[0], 7u);
  EXPECT_EQ(data.at<uint32_t>(0x600)[1], 8u);
  EXPECT_EQ(*data.at<uint32_t>(0x608), 9u);
  EXPECT_EQ(*data.at<uint32_t>(0x60c), 10u);
  // Misaligned IB base: a memory fault naming it.
  r.submit(sdma_indirect(ib.va(4), 4));
  auto f = ev.wait_fault();
  EXPECT_TRUE(f.memory);
  EXPECT_EQ(f.address, ib.va(4));
}

TEST_F(EngineTest, SdmaUnknownOpFaults) {
  Ring r(mem, *eng, QueueDesc::Type::Sdma, 17, 4096);
  r.submit(cat({sdma_nops(2), {sdma::header(sdma::Op(3), 0)}}));
  auto f = ev.wait_fault();
  EXPECT_EQ(f.queue, 17u);
  EXPECT_FALSE(f.memory);
  EXPECT_EQ(f.what, "copy queue 17: unknown SDMA op 3 sub-op 0 at ring offset 0x8 (header 0x00000003)");
  ev.clear();
  Ring r2(mem, *eng, QueueDesc::Type::Sdma, 18, 4096);
  r2.submit({sdma::header(sdma::TIMESTAMP, 1), 0, 0});  // GET (local), not GET_GLOBAL
  f = ev.wait_fault();
  EXPECT_EQ(f.what, "copy queue 18: unknown SDMA op 13 sub-op 1 at ring offset 0x0 (header 0x0000010D)");
}

// ------------------------------------------------------------------------------------------
// Lifecycle

TEST_F(EngineTest, RemoveQueueAndDestroyWhileBlocked) {
  auto r = std::make_unique<Ring>(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);
  r->submit(wait_mem(data.va(0x700), 1));
  std::this_thread::sleep_for(1ms);
  eng->remove_queue(1);
  auto r2 = std::make_unique<Ring>(mem, *eng, QueueDesc::Type::Pm4, 1, 4096);  // id reusable
  r2->submit(wait_mem(data.va(0x700), 1));
  auto t0 = std::chrono::steady_clock::now();
  eng.reset();  // stops promptly with a queue blocked on a wait
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  r->detach();
  r2->detach();
}

// A kernel that never finishes on its own (it waits for memory nobody writes) but, as a
// wave would be preempted, returns once the GPU abandons it. g_spinners counts its starts.
std::atomic<int> g_spinners{0};
void register_spinner() {
  hcq::emu::register_kernel("engine_test_spin", [](const hcq::emu::Dispatch& d) {
    g_spinners.fetch_add(1);
    while (!d.abandoned()) std::this_thread::sleep_for(100us);
  });
}

// Destroying the GPU while a kernel runs abandons the kernel instead of waiting for it.
TEST_F(EngineTest, DestroyAbandonsARunningKernel) {
  register_spinner();
  Buf code(mem, 0x1000, 0x1000);
  auto img = make_code_object("engine_test_spin", 0, kDispatchPtr | kKernargPtr);
  std::memcpy(code.at(), img.data(), img.size());
  Buf args(mem, 256);
  auto r = std::make_unique<Ring>(mem, *eng, QueueDesc::Type::Pm4, 3, 4096);
  const int before = g_spinners.load();
  r->submit(launch(code.va(kCodeOff), args.va(), {1, 1, 1}, {1, 1, 1}));
  ASSERT_TRUE(eventually([&] { return g_spinners.load() > before; }));
  auto t0 = std::chrono::steady_clock::now();
  eng.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  r->detach();
}

// Removing the queue a kernel runs on abandons that kernel (KFD preempts a queue it destroys);
// a kernel of another queue runs on.
TEST_F(EngineTest, RemovingAQueueAbandonsItsRunningKernel) {
  register_spinner();
  Buf code(mem, 0x1000, 0x1000);
  auto img = make_code_object("engine_test_spin", 0, kDispatchPtr | kKernargPtr);
  std::memcpy(code.at(), img.data(), img.size());
  Buf args(mem, 256);
  auto r = std::make_unique<Ring>(mem, *eng, QueueDesc::Type::Pm4, 4, 4096);
  const int before = g_spinners.load();
  r->submit(launch(code.va(kCodeOff), args.va(), {1, 1, 1}, {1, 1, 1}));
  ASSERT_TRUE(eventually([&] { return g_spinners.load() > before; }));
  auto t0 = std::chrono::steady_clock::now();
  eng->remove_queue(4);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  r->detach();
  Ring other(mem, *eng, QueueDesc::Type::Pm4, 5, 4096);  // the engine goes on
  other.submit(release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(0x40), 7));
  EXPECT_TRUE(eventually([&] { return load(data.at<uint32_t>(0x40)) == 7u; }));
}

TEST(EmuEngine, RemoveQueueFromTheFaultCallback) {
  struct Removing : Events {
    Engine* eng = nullptr;
    void fault(uint32_t q, bool memory, uint64_t addr, const std::string& what) override {
      eng->remove_queue(q);  // runs on the engine thread, inside a pass
      Events::fault(q, memory, addr, what);
    }
  };
  Memory mem;
  Removing ev;
  Engine eng(Gen::Gfx12, mem, ev);
  ev.eng = &eng;
  Ring r(mem, eng, QueueDesc::Type::Pm4, 9, 4096);
  r.submit({pm4::header(pm4::Op(0x99), 1), 0});
  EXPECT_EQ(ev.wait_fault().queue, 9u);
  // The id is free again; a new queue with it runs.
  Buf data(mem, 4096);
  r.detach();
  Ring r2(mem, eng, QueueDesc::Type::Pm4, 9, 4096);
  r2.submit(release_mem(pm4::V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW, 0, data.va(), 5));
  ASSERT_TRUE(r2.drained());
  EXPECT_EQ(*data.at<uint32_t>(), 5u);
}

TEST_F(EngineTest, AddQueueValidates) {
  Buf ring(mem, 4096);
  volatile uint64_t db = 0;
  QueueDesc d;
  d.ring_va = ring.va();
  d.ring_bytes = 1000;
  d.rptr_va = data.va();
  d.doorbell = &db;
  EXPECT_THROW(eng->add_queue(d), hcq::InvalidInput);  // not a power of two
  d.ring_bytes = 8192;
  EXPECT_THROW(eng->add_queue(d), hcq::InvalidInput);  // past the mapping
  d.ring_bytes = 4096;
  eng->add_queue(d);
  EXPECT_THROW(eng->add_queue(d), hcq::InvalidInput);  // same id
  eng->remove_queue(d.id);
}

}  // namespace
}  // namespace hcq::amd::emu
