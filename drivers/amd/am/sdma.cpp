#include "amd/am/sdma.hpp"

#include <bit>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace hcq::amd::am {

namespace gc = gc_11_0_0;
namespace gcf = gc_11_0_0::fields;  // SDMA1 registers have SDMA0's fields

namespace {

uint32_t lo32(uint64_t v) { return uint32_t(v); }
uint32_t hi32(uint64_t v) { return uint32_t(v >> 32); }

// Appended piece by piece: GCC 12 -O3 warns falsely (-Wrestrict) on "literal" + std::string.
std::string queue_name(uint32_t engine) {
  std::string out = "SDMA";
  out += std::to_string(engine);
  out += " queue 0";
  return out;
}

}  // namespace

Reg sdma_engine_reg(uint32_t engine, const Reg& sdma0) {
  // Linux sdma_v6_0.c: SDMA1_REG_OFFSET 0x600, SDMA0_HYP_DEC_REG_START 0x5880 .. _END 0x589a
  // (segment 1), SDMA1_HYP_DEC_REG_OFFSET 0x20.
  if (engine >= kSdmaEngines)
    throw InvalidInput(queue_name(engine) + ": gfx1100 has SDMA engines 0 and 1");
  Reg r = sdma0;
  const bool hyp_dec = r.base_idx == 1 && r.offset >= 0x5880 && r.offset <= 0x589a;
  r.offset += engine * (hyp_dec ? 0x20 : 0x600);
  return r;
}

SdmaQueue::SdmaQueue(RegisterIo& io, const SdmaQueueConfig& c) : io_(io), config_(c) {
  const std::string name = queue_name(c.engine);
  const Reg rb_cntl_reg = reg(gc::SDMA0_QUEUE0_RB_CNTL);  // InvalidInput for an engine past 1
  if (c.ring_bytes < 256 || c.ring_bytes > (uint64_t(1) << 30) ||
      !std::has_single_bit(c.ring_bytes))
    throw InvalidInput(name + ": ring size " + hex(c.ring_bytes) +
                       " is not a power of two from 0x100 to 0x40000000");
  if (c.ring_va & 0xff)
    throw InvalidInput(name + ": ring " + hex(c.ring_va) + " must be 256-byte aligned");
  if ((c.rptr_va & 7) || (c.wptr_va & 7))
    throw InvalidInput(name + ": read pointer " + hex(c.rptr_va) + " and write pointer " +
                       hex(c.wptr_va) + " must be 8-byte aligned");
  if (c.doorbell_dword & 1)
    throw InvalidInput(name + ": doorbell dword " + hex(c.doorbell_dword) +
                       " is odd (gfx11 doorbells are 64-bit)");

  // RB_SIZE: log2 of the ring's dwords; privileged; VMID 0.
  uint32_t rb_cntl = 0;
  rb_cntl = gcf::SDMA0_QUEUE0_RB_CNTL::RB_SIZE.set(rb_cntl, std::countr_zero(c.ring_bytes / 4));
  rb_cntl = gcf::SDMA0_QUEUE0_RB_CNTL::RB_PRIV.set(rb_cntl, 1);
  io_.write(rb_cntl_reg, rb_cntl);
  io_.write(reg(gc::SDMA0_QUEUE0_RB_RPTR), 0);
  io_.write(reg(gc::SDMA0_QUEUE0_RB_RPTR_HI), 0);
  io_.write(reg(gc::SDMA0_QUEUE0_RB_WPTR), 0);
  io_.write(reg(gc::SDMA0_QUEUE0_RB_WPTR_HI), 0);
  io_.write(reg(gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO), lo32(c.wptr_va));
  io_.write(reg(gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI), hi32(c.wptr_va));
  io_.write(reg(gc::SDMA0_QUEUE0_RB_RPTR_ADDR_HI), hi32(c.rptr_va));
  io_.write(reg(gc::SDMA0_QUEUE0_RB_RPTR_ADDR_LO), lo32(c.rptr_va) & 0xfffffffc);
  io_.write(reg(gc::SDMA0_QUEUE0_RB_BASE), lo32(c.ring_va >> 8));
  io_.write(reg(gc::SDMA0_QUEUE0_RB_BASE_HI), uint32_t(c.ring_va >> 40));
  // Before a write pointer smaller than the last one, MINOR_PTR_UPDATE 1.
  io_.write(reg(gc::SDMA0_QUEUE0_MINOR_PTR_UPDATE), 1);
  io_.write(reg(gc::SDMA0_QUEUE0_RB_WPTR), 0);
  io_.write(reg(gc::SDMA0_QUEUE0_RB_WPTR_HI), 0);
  update(gc::SDMA0_QUEUE0_DOORBELL, {{gcf::SDMA0_QUEUE0_DOORBELL::ENABLE, 1}});
  update(gc::SDMA0_QUEUE0_DOORBELL_OFFSET,
         {{gcf::SDMA0_QUEUE0_DOORBELL_OFFSET::OFFSET, c.doorbell_dword}});
  io_.write(reg(gc::SDMA0_QUEUE0_MINOR_PTR_UPDATE), 0);
  // Hang watchdog: 100 units of 100 ms (tinygrad; Linux max(usec_timeout / 100000, 1)).
  update(gc::SDMA0_WATCHDOG_CNTL, {{gcf::SDMA0_WATCHDOG_CNTL::QUEUE_HANG_COUNT, 100}});
  update(gc::SDMA0_UTCL1_CNTL,
         {{gcf::SDMA0_UTCL1_CNTL::RESP_MODE, 3}, {gcf::SDMA0_UTCL1_CNTL::REDO_DELAY, 9}});
  update(gc::SDMA0_UTCL1_PAGE, {{gcf::SDMA0_UTCL1_PAGE::RD_L2_POLICY, 2},
                                {gcf::SDMA0_UTCL1_PAGE::WR_L2_POLICY, 3},
                                {gcf::SDMA0_UTCL1_PAGE::LLC_NOALLOC, 1}});
  update(gc::SDMA0_F32_CNTL, {{gcf::SDMA0_F32_CNTL::HALT, 0}, {gcf::SDMA0_F32_CNTL::TH1_RESET, 0}});
  rb_cntl = gcf::SDMA0_QUEUE0_RB_CNTL::RPTR_WRITEBACK_ENABLE.set(rb_cntl, 1);
  rb_cntl = gcf::SDMA0_QUEUE0_RB_CNTL::RPTR_WRITEBACK_TIMER.set(rb_cntl, 4);
  rb_cntl = gcf::SDMA0_QUEUE0_RB_CNTL::F32_WPTR_POLL_ENABLE.set(rb_cntl, 1);
  rb_cntl = gcf::SDMA0_QUEUE0_RB_CNTL::RB_ENABLE.set(rb_cntl, 1);
  io_.write(rb_cntl_reg, rb_cntl);
  update(gc::SDMA0_QUEUE0_IB_CNTL, {{gcf::SDMA0_QUEUE0_IB_CNTL::IB_ENABLE, 1}});
  running_ = true;
  const uint32_t now = io_.read(rb_cntl_reg);
  if (!gcf::SDMA0_QUEUE0_RB_CNTL::RB_ENABLE.get(now)) {
    stop();
    throw Error(name + ": " + std::string(describe(rb_cntl_reg).name) +
                ".RB_ENABLE reads 0 after enabling (register " + hex(now) + ")");
  }
}

SdmaQueue::~SdmaQueue() {
  ignoring_errors([this] { stop(); });
}

void SdmaQueue::update(const Reg& sdma0, FieldValues fields) {
  const Reg r = reg(sdma0);
  io_.write(r, with_fields(io_.read(r), fields));
}

void SdmaQueue::stop() {
  if (!running_) return;
  update(gc::SDMA0_QUEUE0_RB_CNTL, {{gcf::SDMA0_QUEUE0_RB_CNTL::RB_ENABLE, 0}});
  update(gc::SDMA0_QUEUE0_IB_CNTL, {{gcf::SDMA0_QUEUE0_IB_CNTL::IB_ENABLE, 0}});
  update(gc::SDMA0_QUEUE0_DOORBELL, {{gcf::SDMA0_QUEUE0_DOORBELL::ENABLE, 0}});
  io_.write(reg(gc::SDMA0_QUEUE0_DOORBELL_OFFSET), 0);
  running_ = false;
}

}  // namespace hcq::amd::am
