#include "amd/encoders.hpp"

#include "amd/code_object.hpp"
#include "core/error.hpp"

#include <cstring>

namespace hcq::amd {

using namespace pm4;

namespace {
constexpr uint32_t lo(uint64_t v) { return uint32_t(v); }
constexpr uint32_t hi(uint64_t v) { return uint32_t(v >> 32); }
constexpr uint32_t sh(uint32_t reg) { return reg - kShRegBase; }
// WAIT_REG_MEM's poll interval: Linux gfx_v9_0_ring_emit_pipeline_sync and tinygrad use 4.
constexpr uint32_t kWaitPollInterval = 4;
}  // namespace

// ---- PM4 ------------------------------------------------------------------------------

Pm4Encoder::Pm4Encoder(Gen gen, InterruptTarget irq)
    : gen_(gen), irq_(irq), rsrc3_reg_(regs::address("COMPUTE_PGM_RSRC3", gen)) {}

void Pm4Encoder::wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) {
  uint32_t at = uint32_t(cs.size());
  if (gen_ == Gen::Gfx9) {
    // gfx9 MEC: the 32-bit WAIT_REG_MEM Linux's gfx9 code uses (soc15d.h, gfx_v9_0.c
    // gfx_v9_0_wait_reg_mem); no public gfx9 source but PAL's 2017 headers has WAIT_REG_MEM64.
    // The 64-bit >= as two 32-bit >= polls: the high word reaches H, then the low word L.
    uint32_t* p = cs.grow(14);
    wait_reg_mem32(p, va + 4, hi(value));
    wait_reg_mem32(p + 7, va, lo(value));
    s.push_back(offset_site(at + 2, PatchFormat::LoHi64, PatchRole::WaitAddress, 4));
    s.push_back({at + 9, PatchFormat::LoHi64, PatchRole::WaitAddress});
    s.push_back({at + 4, PatchFormat::Hi32, PatchRole::WaitValue});
    s.push_back({at + 11, PatchFormat::Lo32, PatchRole::WaitValue});
    return;
  }
  // gfx10+: WAIT_REG_MEM64 (Linux nvd.h PACKET3_WAIT_REG_MEM64), one 64-bit compare.
  uint32_t* p = cs.grow(9);
  p[0] = header(WAIT_REG_MEM64, 8);
  p[1] = WAIT_REG_MEM64_FUNCTION(kFunctionGreaterEqual) | WAIT_REG_MEM64_MEM_SPACE(1);
  p[2] = lo(va);
  p[3] = hi(va);
  p[4] = lo(value);
  p[5] = hi(value);
  p[6] = 0xffffffff;
  p[7] = 0xffffffff;
  p[8] = WAIT_REG_MEM64_POLL_INTERVAL(kWaitPollInterval);
  s.push_back({at + 2, PatchFormat::LoHi64, PatchRole::WaitAddress});
  s.push_back({at + 4, PatchFormat::LoHi64, PatchRole::WaitValue});
}

void Pm4Encoder::wait_reg_mem32(uint32_t* p, uint64_t va, uint32_t ref) {
  p[0] = header(WAIT_REG_MEM, 6);
  p[1] = WAIT_REG_MEM_FUNCTION(kFunctionGreaterEqual) | WAIT_REG_MEM_MEM_SPACE(1);
  p[2] = lo(va);
  p[3] = hi(va);
  p[4] = ref;
  p[5] = 0xffffffff;
  p[6] = WAIT_REG_MEM_POLL_INTERVAL(kWaitPollInterval);
}

void Pm4Encoder::release_mem(uint32_t* p, uint32_t data_sel, uint32_t int_sel, uint64_t va,
                             uint64_t data, uint32_t ctxid, bool cache_flush) const {
  uint32_t flush = 0;
  if (cache_flush) {
    switch (gen_) {
      case Gen::Gfx9:  // write back L2 (tinygrad, kfdtest)
        flush = RELEASE_MEM_TC_WB_ACTION_ENA(1) | RELEASE_MEM_TC_NC_ACTION_ENA(1);
        break;
      case Gen::Gfx11:
        flush = RELEASE_MEM_GCR_GLV_INV(1) | RELEASE_MEM_GCR_GL1_INV(1) |
                RELEASE_MEM_GCR_GL2_INV(1) | RELEASE_MEM_GCR_GLM_WB(1) |
                RELEASE_MEM_GCR_GLM_INV(1) | RELEASE_MEM_GCR_GL2_WB(1) | RELEASE_MEM_GCR_SEQ(1);
        break;
      case Gen::Gfx12:  // Linux gfx12 fences only write back; invalidation is ACQUIRE_MEM's job
        flush = RELEASE_MEM_GCR_GL2_WB(1) | RELEASE_MEM_GCR_SEQ(1);
        break;
    }
  }
  p[0] = header(RELEASE_MEM, 7);
  p[1] = RELEASE_MEM_EVENT_TYPE(kEventCacheFlushAndInvTs) |
         RELEASE_MEM_EVENT_INDEX(kEventIndexEndOfPipe) | flush;
  p[2] = RELEASE_MEM_DATA_SEL(data_sel) | RELEASE_MEM_INT_SEL(int_sel) | RELEASE_MEM_DST_SEL(0);
  p[3] = lo(va);
  p[4] = hi(va);
  p[5] = lo(data);
  p[6] = hi(data);
  p[7] = ctxid;
}

void Pm4Encoder::signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                        std::vector<PatchSite>& s) {
  uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(wake ? 16 : 8);
  release_mem(p, kDataSel64, kIntSelNone, va, value, 0, true);
  if (wake)  // write the event id to its mailbox slot and interrupt: KFD wakes the waiters
    release_mem(p + 8, kDataSel32, kIntSelAfterWriteConfirm, irq_.mailbox_va, irq_.event_id,
                irq_.event_id, false);
  s.push_back({at + 3, PatchFormat::LoHi64, PatchRole::SignalAddress});
  s.push_back({at + 5, PatchFormat::LoHi64, PatchRole::SignalValue});
}

void Pm4Encoder::timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) {
  uint32_t at = uint32_t(cs.size());
  release_mem(cs.grow(8), kDataSelClock, kIntSelNone, va + 8, 0, 0, false);
  s.push_back({at + 3, PatchFormat::LoHi64, PatchRole::TimestampAddress});
}

void Pm4Encoder::memory_barrier(CommandStream& cs) {
  if (gen_ == Gen::Gfx9) {
    uint32_t* p = cs.grow(7);
    p[0] = header(ACQUIRE_MEM, 6);
    p[1] = ACQUIRE_MEM_COHER_CNTL(kCoherShIcache | kCoherShKcache | kCoherTc | kCoherTcl1 |
                                  kCoherTcWb);
    p[2] = ACQUIRE_MEM_COHER_SIZE(0xffffffff);
    p[3] = ACQUIRE_MEM_COHER_SIZE_HI(0xff);
    p[4] = 0;
    p[5] = 0;
    p[6] = ACQUIRE_MEM_POLL_INTERVAL(0xA);
    return;
  }
  uint32_t* p = cs.grow(8);
  p[0] = header(ACQUIRE_MEM, 7);
  p[1] = 0;
  p[2] = ACQUIRE_MEM_COHER_SIZE(0xffffffff);
  p[3] = ACQUIRE_MEM_COHER_SIZE_HI(0xff);
  p[4] = 0;
  p[5] = 0;
  p[6] = ACQUIRE_MEM_POLL_INTERVAL(0xA);
  p[7] = ACQUIRE_MEM_GCR_CNTL(kGcrGliInvAll | kGcrGlmWb | kGcrGlmInv | kGcrGlkWb | kGcrGlkInv |
                              kGcrGlvInv | kGcrGl1Inv | kGcrGl2Inv | kGcrGl2Wb);
}

void Pm4Encoder::prepare(AmdKernel& k) const {
  const uint32_t nuser = k.kd.user_sgpr_count();
  const int karg = k.kd.kernarg_sgpr();
  // LDS is allocated per dispatch in 512-byte blocks (COMPUTE_PGM_RSRC2.LDS_SIZE, bits 23:15).
  const uint32_t lds_blocks = (k.lds_bytes + 511) / 512;
  const uint64_t pgm = k.code_va >> 8;
  auto& t = k.dispatch;
  t.words.clear();
  auto set_sh = [&](uint32_t reg, std::initializer_list<uint32_t> vals) {
    t.words.push_back(header(SET_SH_REG, uint32_t(vals.size()) + 1));
    t.words.push_back(SET_SH_REG_REG_OFFSET(sh(reg)));
    t.words.insert(t.words.end(), vals);
  };
  set_sh(regs::COMPUTE_PGM_LO_ALL.address, {lo(pgm), hi(pgm)});
  set_sh(regs::COMPUTE_PGM_RSRC1_ALL.address,
         {k.kd.compute_pgm_rsrc1, k.kd.compute_pgm_rsrc2 | (lds_blocks << 15)});
  set_sh(rsrc3_reg_, {k.kd.compute_pgm_rsrc3});
  set_sh(regs::COMPUTE_TMPRING_SIZE_ALL.address, {0});
  set_sh(regs::COMPUTE_RESTART_X_ALL.address, {0, 0, 0});
  // User SGPRs in AMDHSA order; only the kernarg segment pointer is provided (programs that
  // need a dispatch packet or scratch are rejected at load). A kernel with none gets no
  // packet: SET_SH_REG always carries a register (Linux gfx_v9_0.c, Mesa ac_cmdbuf.c).
  t.kernarg_at = -1;
  if (nuser > 0) {
    t.words.push_back(header(SET_SH_REG, nuser + 1));
    t.words.push_back(SET_SH_REG_REG_OFFSET(sh(regs::COMPUTE_USER_DATA_0_ALL.address)));
    size_t user = t.words.size();
    t.words.resize(user + nuser, 0);
    if (karg >= 0 && uint32_t(karg) + 2 <= nuser) t.kernarg_at = int32_t(user) + karg;
  }
  set_sh(regs::COMPUTE_RESOURCE_LIMITS_ALL.address, {0});
  set_sh(regs::COMPUTE_START_X_ALL.address, {0, 0, 0, 1, 1, 1});
  t.block_at = uint32_t(t.words.size()) - 3;
  uint32_t initiator = kInitiatorComputeShaderEn | kInitiatorForceStartAt000;
  if (gen_ != Gen::Gfx9 && k.wave_size == 32) initiator |= kInitiatorCsW32En;
  t.words.push_back(header(DISPATCH_DIRECT, 4));
  t.grid_at = uint32_t(t.words.size());
  t.words.insert(t.words.end(), {1, 1, 1, initiator});
  // Wait for the dispatch's waves before later packets (signals) run.
  t.words.push_back(header(EVENT_WRITE, 1));
  t.words.push_back(EVENT_WRITE_EVENT_TYPE(kEventCsPartialFlush) |
                    EVENT_WRITE_EVENT_INDEX(kEventIndexPartialFlush));
  t.gen = uint8_t(gen_);
}

void Pm4Encoder::exec(CommandStream& cs, const KernelObject& obj, uint64_t kernargs, Dim3 grid,
                      Dim3 block, std::vector<PatchSite>& s) {
  const auto& k = static_cast<const AmdKernel&>(obj);
  const AmdKernel::DispatchTemplate* t = &k.dispatch;
  AmdKernel local;
  if (t->gen != uint8_t(gen_) || t->words.empty()) {  // not prepared for this generation
    local = k;
    prepare(local);
    t = &local.dispatch;
  }
  const uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(t->words.size());
  std::memcpy(p, t->words.data(), t->words.size() * 4);
  p[t->block_at] = block.x;
  p[t->block_at + 1] = block.y;
  p[t->block_at + 2] = block.z;
  p[t->grid_at] = grid.x;
  p[t->grid_at + 1] = grid.y;
  p[t->grid_at + 2] = grid.z;
  size_t first = s.size();
  s.resize(first + (t->kernarg_at >= 0 ? 7 : 6));
  PatchSite* site = s.data() + first;
  *site++ = {at + t->block_at, PatchFormat::Lo32, PatchRole::BlockX};
  *site++ = {at + t->block_at + 1, PatchFormat::Lo32, PatchRole::BlockY};
  *site++ = {at + t->block_at + 2, PatchFormat::Lo32, PatchRole::BlockZ};
  *site++ = {at + t->grid_at, PatchFormat::Lo32, PatchRole::GridX};
  *site++ = {at + t->grid_at + 1, PatchFormat::Lo32, PatchRole::GridY};
  *site++ = {at + t->grid_at + 2, PatchFormat::Lo32, PatchRole::GridZ};
  if (t->kernarg_at >= 0) {
    p[t->kernarg_at] = lo(kernargs);
    p[t->kernarg_at + 1] = hi(kernargs);
    *site = {at + uint32_t(t->kernarg_at), PatchFormat::LoHi64, PatchRole::KernargAddress};
  }
}

void Pm4Encoder::copy(CommandStream&, uint64_t, uint64_t, uint64_t, std::vector<PatchSite>&) {
  throw InvalidInput("AMD compute queues do not copy; use the copy queue");
}

void Pm4Encoder::indirect_buffer(uint32_t* p, uint64_t va, uint32_t ndwords) {
  p[0] = header(INDIRECT_BUFFER, 3);
  p[1] = lo(va);
  p[2] = hi(va);
  p[3] = INDIRECT_BUFFER_IB_SIZE(ndwords) | INDIRECT_BUFFER_VALID(1);
}

// ---- SDMA -----------------------------------------------------------------------------

SdmaEncoder::SdmaEncoder(Gen gen, InterruptTarget irq) : gen_(gen), irq_(irq) {}

namespace {
void poll_ge(uint32_t* p, uint64_t va, uint32_t value) {
  using namespace sdma;
  p[0] = header(POLL_REGMEM, 0) | POLL_REGMEM_FUNC_ALL(kFuncGreaterEqual) |
         POLL_REGMEM_MEM_POLL_ALL(1);
  p[1] = lo(va);
  p[2] = hi(va);
  p[3] = value;
  p[4] = 0xffffffff;
  p[5] = POLL_REGMEM_INTERVAL_ALL(4) | POLL_REGMEM_RETRY_COUNT_ALL(0xfff);
}
}  // namespace

void SdmaEncoder::wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) {
  using namespace sdma;
  uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(17);
  poll_ge(p, va + 4, hi(value));
  p[6] = header(COND_EXE, 0);
  p[7] = lo(va + 4);
  p[8] = hi(va + 4);
  p[9] = hi(value);
  p[10] = COND_EXE_EXEC_COUNT_ALL(6);
  poll_ge(p + 11, va, lo(value));
  s.push_back(offset_site(at + 1, PatchFormat::LoHi64, PatchRole::WaitAddress, 4));
  s.push_back(offset_site(at + 7, PatchFormat::LoHi64, PatchRole::WaitAddress, 4));
  s.push_back(offset_site(at + 12, PatchFormat::LoHi64, PatchRole::WaitAddress, 0));
  s.push_back({at + 3, PatchFormat::Hi32, PatchRole::WaitValue});
  s.push_back({at + 9, PatchFormat::Hi32, PatchRole::WaitValue});
  s.push_back({at + 14, PatchFormat::Lo32, PatchRole::WaitValue});
}

void SdmaEncoder::fence(uint32_t* p, uint64_t va, uint32_t data) const {
  using namespace sdma;
  p[0] = header(FENCE, 0) | (gen_ == Gen::Gfx9 ? 0 : FENCE_MTYPE_GFX11_12(3));
  p[1] = lo(va);
  p[2] = hi(va);
  p[3] = data;
}

void SdmaEncoder::signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                         std::vector<PatchSite>& s) {
  using namespace sdma;
  uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(wake ? 14 : 8);
  fence(p, va, lo(value));
  fence(p + 4, va + 4, hi(value));
  if (wake) {
    fence(p + 8, irq_.mailbox_va, irq_.event_id);
    p[12] = header(TRAP, 0);
    p[13] = TRAP_INT_CONTEXT_ALL(irq_.event_id);
  }
  s.push_back(offset_site(at + 1, PatchFormat::LoHi64, PatchRole::SignalAddress, 0));
  s.push_back(offset_site(at + 5, PatchFormat::LoHi64, PatchRole::SignalAddress, 4));
  s.push_back({at + 3, PatchFormat::Lo32, PatchRole::SignalValue});
  s.push_back({at + 7, PatchFormat::Hi32, PatchRole::SignalValue});
}

void SdmaEncoder::timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) {
  using namespace sdma;
  uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(3);
  p[0] = header(TIMESTAMP, kSubOpTimestampGetGlobal);
  p[1] = lo(va + 8);  // the record's second half (Encoder::timestamp)
  p[2] = hi(va + 8);
  s.push_back({at + 1, PatchFormat::LoHi64, PatchRole::TimestampAddress});
}

// SDMA executes its packets in order; copies are complete before a later fence.
void SdmaEncoder::memory_barrier(CommandStream&) {}

void SdmaEncoder::exec(CommandStream&, const KernelObject&, uint64_t, Dim3, Dim3,
                       std::vector<PatchSite>&) {
  throw InvalidInput("AMD copy queues do not launch kernels; use the compute queue");
}

void SdmaEncoder::copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
                       std::vector<PatchSite>& s) {
  using namespace sdma;
  const uint64_t max = max_copy_bytes(gen_);
  const Field count = gen_ == Gen::Gfx9 ? COPY_LINEAR_COUNT_GFX9 : COPY_LINEAR_COUNT_GFX11_12;
  for (uint64_t off = 0; off < size; off += max) {
    uint64_t n = std::min(max, size - off);
    uint32_t at = uint32_t(cs.size());
    uint32_t* p = cs.grow(7);
    p[0] = header(COPY_LINEAR, 0);
    p[1] = count(n - 1);
    p[2] = 0;
    p[3] = lo(src + off);
    p[4] = hi(src + off);
    p[5] = lo(dst + off);
    p[6] = hi(dst + off);
    s.push_back(offset_site(at + 3, PatchFormat::LoHi64, PatchRole::CopySrc, off));
    s.push_back(offset_site(at + 5, PatchFormat::LoHi64, PatchRole::CopyDst, off));
  }
}

void SdmaEncoder::indirect(uint32_t* p, uint64_t va, uint32_t ndwords) {
  using namespace sdma;
  p[0] = header(INDIRECT, 0);
  p[1] = lo(va);
  p[2] = hi(va);
  p[3] = INDIRECT_IB_SIZE_ALL(ndwords);
  p[4] = 0;
  p[5] = 0;
}

}  // namespace hcq::amd
