#include "amd/am/sdma.hpp"

#include <bit>
#include <string>

#include "core/error.hpp"

namespace hcq::amd::am {

namespace gc = gc_11_0_0;

namespace {

uint32_t set(const Reg& r, uint32_t value, std::string_view name, uint32_t v) {
  return describe(r).field(name).set(value, v);
}

uint32_t lo32(uint64_t v) { return uint32_t(v); }
uint32_t hi32(uint64_t v) { return uint32_t(v >> 32); }

}  // namespace

SdmaQueue::SdmaQueue(RegisterIo& io, const SdmaQueueConfig& c) : io_(io), config_(c) {
  const std::string name = "SDMA0 queue 0";
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
  rb_cntl = set(gc::SDMA0_QUEUE0_RB_CNTL, rb_cntl, "RB_SIZE", std::countr_zero(c.ring_bytes / 4));
  rb_cntl = set(gc::SDMA0_QUEUE0_RB_CNTL, rb_cntl, "RB_PRIV", 1);
  io_.write(gc::SDMA0_QUEUE0_RB_CNTL, rb_cntl);
  io_.write(gc::SDMA0_QUEUE0_RB_RPTR, 0);
  io_.write(gc::SDMA0_QUEUE0_RB_RPTR_HI, 0);
  io_.write(gc::SDMA0_QUEUE0_RB_WPTR, 0);
  io_.write(gc::SDMA0_QUEUE0_RB_WPTR_HI, 0);
  io_.write(gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO, lo32(c.wptr_va));
  io_.write(gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI, hi32(c.wptr_va));
  io_.write(gc::SDMA0_QUEUE0_RB_RPTR_ADDR_HI, hi32(c.rptr_va));
  io_.write(gc::SDMA0_QUEUE0_RB_RPTR_ADDR_LO, lo32(c.rptr_va) & 0xfffffffc);
  io_.write(gc::SDMA0_QUEUE0_RB_BASE, lo32(c.ring_va >> 8));
  io_.write(gc::SDMA0_QUEUE0_RB_BASE_HI, uint32_t(c.ring_va >> 40));
  // Before a write pointer smaller than the last one, MINOR_PTR_UPDATE 1.
  io_.write(gc::SDMA0_QUEUE0_MINOR_PTR_UPDATE, 1);
  io_.write(gc::SDMA0_QUEUE0_RB_WPTR, 0);
  io_.write(gc::SDMA0_QUEUE0_RB_WPTR_HI, 0);
  io_.write(gc::SDMA0_QUEUE0_DOORBELL,
            set(gc::SDMA0_QUEUE0_DOORBELL, io_.read(gc::SDMA0_QUEUE0_DOORBELL), "ENABLE", 1));
  io_.write(gc::SDMA0_QUEUE0_DOORBELL_OFFSET,
            set(gc::SDMA0_QUEUE0_DOORBELL_OFFSET, io_.read(gc::SDMA0_QUEUE0_DOORBELL_OFFSET),
                "OFFSET", c.doorbell_dword));
  io_.write(gc::SDMA0_QUEUE0_MINOR_PTR_UPDATE, 0);
  // Hang watchdog: 100 units of 100 ms (tinygrad; Linux max(usec_timeout / 100000, 1)).
  io_.write(gc::SDMA0_WATCHDOG_CNTL, set(gc::SDMA0_WATCHDOG_CNTL,
                                         io_.read(gc::SDMA0_WATCHDOG_CNTL), "QUEUE_HANG_COUNT",
                                         100));
  uint32_t utcl1 = io_.read(gc::SDMA0_UTCL1_CNTL);
  utcl1 = set(gc::SDMA0_UTCL1_CNTL, utcl1, "RESP_MODE", 3);
  utcl1 = set(gc::SDMA0_UTCL1_CNTL, utcl1, "REDO_DELAY", 9);
  io_.write(gc::SDMA0_UTCL1_CNTL, utcl1);
  uint32_t page = io_.read(gc::SDMA0_UTCL1_PAGE);
  page = set(gc::SDMA0_UTCL1_PAGE, page, "RD_L2_POLICY", 2);
  page = set(gc::SDMA0_UTCL1_PAGE, page, "WR_L2_POLICY", 3);
  page = set(gc::SDMA0_UTCL1_PAGE, page, "LLC_NOALLOC", 1);
  io_.write(gc::SDMA0_UTCL1_PAGE, page);
  uint32_t f32 = io_.read(gc::SDMA0_F32_CNTL);
  f32 = set(gc::SDMA0_F32_CNTL, f32, "HALT", 0);
  f32 = set(gc::SDMA0_F32_CNTL, f32, "TH1_RESET", 0);
  io_.write(gc::SDMA0_F32_CNTL, f32);
  rb_cntl = set(gc::SDMA0_QUEUE0_RB_CNTL, rb_cntl, "RPTR_WRITEBACK_ENABLE", 1);
  rb_cntl = set(gc::SDMA0_QUEUE0_RB_CNTL, rb_cntl, "RPTR_WRITEBACK_TIMER", 4);
  rb_cntl = set(gc::SDMA0_QUEUE0_RB_CNTL, rb_cntl, "F32_WPTR_POLL_ENABLE", 1);
  rb_cntl = set(gc::SDMA0_QUEUE0_RB_CNTL, rb_cntl, "RB_ENABLE", 1);
  io_.write(gc::SDMA0_QUEUE0_RB_CNTL, rb_cntl);
  io_.write(gc::SDMA0_QUEUE0_IB_CNTL,
            set(gc::SDMA0_QUEUE0_IB_CNTL, io_.read(gc::SDMA0_QUEUE0_IB_CNTL), "IB_ENABLE", 1));
  running_ = true;
  const uint32_t now = io_.read(gc::SDMA0_QUEUE0_RB_CNTL);
  if (!describe(gc::SDMA0_QUEUE0_RB_CNTL).field("RB_ENABLE").get(now)) {
    stop();
    throw Error(name + ": SDMA0_QUEUE0_RB_CNTL.RB_ENABLE reads 0 after enabling (register " +
                hex(now) + ")");
  }
}

SdmaQueue::~SdmaQueue() {
  try {
    stop();
  } catch (...) {
    // Destructors do not throw; stop() reports the same failure to a caller that asks.
  }
}

void SdmaQueue::stop() {
  if (!running_) return;
  io_.write(gc::SDMA0_QUEUE0_RB_CNTL, set(gc::SDMA0_QUEUE0_RB_CNTL,
                                          io_.read(gc::SDMA0_QUEUE0_RB_CNTL), "RB_ENABLE", 0));
  io_.write(gc::SDMA0_QUEUE0_IB_CNTL, set(gc::SDMA0_QUEUE0_IB_CNTL,
                                          io_.read(gc::SDMA0_QUEUE0_IB_CNTL), "IB_ENABLE", 0));
  io_.write(gc::SDMA0_QUEUE0_DOORBELL,
            set(gc::SDMA0_QUEUE0_DOORBELL, io_.read(gc::SDMA0_QUEUE0_DOORBELL), "ENABLE", 0));
  io_.write(gc::SDMA0_QUEUE0_DOORBELL_OFFSET, 0);
  running_ = false;
}

}  // namespace hcq::amd::am
