// The emulated AMD GPU's command processors. One thread per Engine polls every queue's
// doorbell, executes the packets between the processed position and the doorbell value, and
// writes the read pointer back after each packet. Decoding uses the Field constants and
// tables from pm4.def / sdma.def / regs.def only.
#include "amd/emu/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "amd/code_object.hpp"
#include "core/error.hpp"

namespace hcq::amd::emu {

using hcq::emu::Fault;

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

__attribute__((format(printf, 1, 2))) std::string strf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

using ull = unsigned long long;

// A queue fault with its full message (less the "compute queue N: " prefix).
struct QueueFault {
  bool memory;
  uint64_t address;
  std::string what;
};

[[noreturn]] void bad(std::string what) { throw QueueFault{false, 0, std::move(what)}; }

inline uint64_t addr64(uint32_t lo, uint32_t hi) { return (uint64_t(hi) << 32) | lo; }

void check_align(uint64_t va, uint64_t align, const char* what) {
  if (va & (align - 1))
    throw Fault(strf("%s address 0x%llx is not %llu-byte aligned", what, ull(va), ull(align)), va);
}

// WAIT_REG_MEM(64) / POLL_REGMEM compare functions (pm4.def, sdma.def: one encoding).
inline bool compare(uint32_t func, uint64_t v, uint64_t ref) {
  using namespace pm4;
  switch (func) {
    case V_WAIT_REG_MEM_FUNCTION_ALWAYS: return true;
    case V_WAIT_REG_MEM_FUNCTION_LESS: return v < ref;
    case V_WAIT_REG_MEM_FUNCTION_LESS_EQUAL: return v <= ref;
    case V_WAIT_REG_MEM_FUNCTION_EQUAL: return v == ref;
    case V_WAIT_REG_MEM_FUNCTION_NOT_EQUAL: return v != ref;
    case V_WAIT_REG_MEM_FUNCTION_GREATER_EQUAL: return v >= ref;
    case V_WAIT_REG_MEM_FUNCTION_GREATER: return v > ref;
  }
  return false;
}
constexpr uint32_t kMaxCompareFunction = pm4::V_WAIT_REG_MEM_FUNCTION_GREATER;
static_assert(pm4::V_WAIT_REG_MEM64_FUNCTION_GREATER_EQUAL ==
                  pm4::V_WAIT_REG_MEM_FUNCTION_GREATER_EQUAL &&
              sdma::V_POLL_REGMEM_FUNC_GREATER_EQUAL == pm4::V_WAIT_REG_MEM_FUNCTION_GREATER_EQUAL &&
              sdma::V_POLL_REGMEM_FUNC_GREATER == pm4::V_WAIT_REG_MEM_FUNCTION_GREATER);

// SET_SH_REG writes the window [0x2C00, 0x3000); SET_UCONFIG_REG's REG_OFFSET spans the rest.
constexpr uint32_t kShRegs = 0x400, kUconfigRegs = pm4::SET_UCONFIG_REG_REG_OFFSET.mask() + 1;
// The longest PM4 packet: a header and COUNT + 1 body dwords.
constexpr uint32_t kPm4MaxPacket = pm4::HEADER_COUNT.mask() + 2;
// PM4 IB nesting the CP supports: the ring calls an IB, which may call one more.
constexpr int kPm4MaxIbDepth = 2, kSdmaMaxIbDepth = 1;
constexpr uint32_t kUserDataRegs =
    regs::COMPUTE_USER_DATA_15_ALL.address - regs::COMPUTE_USER_DATA_0_ALL.address + 1;
// COMPUTE_PGM_LO/HI hold the code address in 256-byte units (Mesa si_emit_dispatch: va >> 8).
constexpr unsigned kPgmAddressShift = 8;
// RELEASE_MEM INT_SEL values that raise the interrupt (Linux kfd_pm4_headers_ai.h).
constexpr bool release_mem_interrupts(uint32_t int_sel) {
  using namespace pm4;
  return int_sel == V_RELEASE_MEM_INT_SEL_SEND_INTERRUPT_ONLY ||
         int_sel == V_RELEASE_MEM_INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM ||
         int_sel == V_RELEASE_MEM_INT_SEL_UNCONDITIONALLY_SEND_INT_CTXID;
}
constexpr uint32_t kMaxIntSel = pm4::V_RELEASE_MEM_INT_SEL_UNCONDITIONALLY_SEND_INT_CTXID,
                   kMaxDstSel = pm4::V_RELEASE_MEM_DST_SEL_TC_L2;

constexpr auto kSpinAfterActivity = std::chrono::microseconds(200);
constexpr auto kMinSleep = std::chrono::microseconds(50);
constexpr auto kMaxSleep = std::chrono::microseconds(1000);

// How many packets one queue runs before the pass moves to the next queue.
constexpr int kPacketsPerTurn = 256;

inline void store_release(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline void store_release(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

}  // namespace

// ------------------------------------------------------------------------------------------
// Queue state

struct Engine::Queue {
  QueueDesc d;
  bool pm4 = true;
  uint64_t pos = 0;  // consumed position: PM4 dwords, SDMA bytes (counts up, never wraps)
  bool dead = false;
  bool removed = false;  // removed from inside a pass; skipped until freed

  // Indirect buffers being executed; the ring packet that called ib[0] is consumed (and the
  // read pointer moved past it) when ib[0] returns. Sizes and positions in dwords.
  struct Ib {
    uint64_t va;
    uint32_t size;
    uint32_t pos;
    uint32_t caller_len;  // dwords of the calling packet, consumed when this IB returns
    const uint32_t* host;
  };
  Ib ib[kPm4MaxIbDepth] = {};
  int depth = 0;

  // Where the packet being executed is, for fault messages.
  const char* cur_name = "";
  bool cur_in_ib = false;
  uint64_t cur_ib_va = 0, cur_off = 0;  // bytes
  // The IB position a blocked packet waits at, for ib_positions() (read by other threads).
  std::atomic<bool> waits_in_ib{false};
  std::atomic<uint64_t> wait_ib_va{0};
  std::atomic<uint32_t> wait_ib_size{0}, wait_ib_pos{0};
  void publish_wait(const Ib& ib) {
    wait_ib_va.store(ib.va, std::memory_order_relaxed);
    wait_ib_size.store(ib.size, std::memory_order_relaxed);
    wait_ib_pos.store(ib.pos, std::memory_order_relaxed);
    waits_in_ib.store(true, std::memory_order_release);
  }

  std::vector<uint32_t> sh = std::vector<uint32_t>(kShRegs);  // SET_SH_REG file
  std::vector<uint32_t> uconfig;                               // allocated on first use
  std::vector<uint32_t> scratch;  // a PM4 packet that wraps the ring end, made contiguous

  uint32_t sh_reg(uint32_t address) const { return sh[address - pm4::kShRegBase]; }
  std::string name() const { return strf("%s queue %u", pm4 ? "compute" : "copy", d.id); }
  std::string where() const {
    return cur_in_ib ? strf("at IB 0x%llx offset 0x%llx", ull(cur_ib_va), ull(cur_off))
                     : strf("at ring offset 0x%llx", ull(cur_off));
  }
};

struct Engine::KernelCache {
  struct Entry {
    uint64_t map_base, map_size, desc_va;
    std::byte desc[KernelDescriptor::kBytes];
    std::string name;
    KernelDescriptor kd;
    const hcq::emu::KernelFn* fn;
  };
  std::unordered_map<uint64_t, Entry> by_entry;  // code entry address -> kernel
};

enum class Engine::Res : uint8_t { Done, Blocked, Called };

// ------------------------------------------------------------------------------------------
// Engine

Engine::Engine(Gen gen, GpuAddressSpace& memory, GpuEvents& events, uint64_t timestamp_hz)
    : gen_(gen), mem_(memory), events_(events), timestamp_hz_(timestamp_hz),
      kernels_(std::make_unique<KernelCache>()) {
  if (timestamp_hz_ == 0) throw hcq::InvalidInput("emulated GPU: timestamp frequency is 0");
  for (auto& p : pm4::packets()) {
    if (!p.exists_on(gen_)) continue;  // an unknown opcode here (WAIT_REG_MEM64 on gfx9, gfx10.3)
    pm4_info_[p.opcode] = &p;
    // The length rule of the description, shared with the decoder: exact or a minimum.
    const pm4::BodyLength n = pm4::body_length(pm4::Op(p.opcode), gen_);
    pm4_body_[p.opcode] = uint16_t(n.dwords);
    pm4_exact_[p.opcode] = n.exact;
  }
  for (auto& p : sdma::packets()) sdma_info_[p.opcode] = &p;
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  stop_.store(true);
  preemption_.abandon_all();  // a kernel still running must let the thread go
  {
    std::lock_guard lk(mu_);
  }
  cv_.notify_all();
  thread_.join();
}

void Engine::add_queue(const QueueDesc& d) {
  auto fail_input = [&](const std::string& why) {
    throw hcq::InvalidInput(strf("emulated GPU: cannot add %s queue %u: ",
                                 d.type == QueueDesc::Type::Pm4 ? "compute" : "copy", d.id) +
                            why);
  };
  if (d.ring_bytes < 32 || (d.ring_bytes & (d.ring_bytes - 1)))
    fail_input(strf("ring size 0x%llx is not a power of two >= 32", ull(d.ring_bytes)));
  if (d.ring_va & 3) fail_input(strf("ring 0x%llx is not 4-byte aligned", ull(d.ring_va)));
  if (d.rptr_va & 7) fail_input(strf("rptr 0x%llx is not 8-byte aligned", ull(d.rptr_va)));
  if (!d.doorbell) fail_input("no doorbell");
  try {
    mem_.translate(d.ring_va, d.ring_bytes);
    mem_.translate(d.rptr_va, 8);
  } catch (const Fault& f) {
    fail_input(f.what());
  }
  auto q = std::make_unique<Queue>();
  q->d = d;
  q->pm4 = d.type == QueueDesc::Type::Pm4;
  if (q->pm4) q->scratch.resize(std::min<uint64_t>(d.ring_bytes / 4, kPm4MaxPacket));
  {
    std::lock_guard lk(mu_);
    for (auto& e : queues_)
      if (e->d.id == d.id) fail_input("a queue with this id exists");
    queues_.push_back(std::move(q));
    list_gen_.fetch_add(1);
  }
  kick();
}

void Engine::remove_queue(uint32_t id) {
  if (std::this_thread::get_id() == thread_.get_id()) {
    // From a GpuEvents callback, inside a pass: free it once the pass is over.
    std::lock_guard lk(mu_);
    for (auto it = queues_.begin(); it != queues_.end(); ++it)
      if ((*it)->d.id == id) {
        (*it)->removed = true;
        graveyard_.push_back(std::move(*it));
        queues_.erase(it);
        list_gen_.fetch_add(1);
        return;
      }
    return;
  }
  // Between passes the engine re-takes exec_mu_ at once; removers_ makes it step aside. A
  // kernel of this queue still running is abandoned, as KFD preempts a queue it destroys.
  removers_.fetch_add(1);
  preemption_.abandon(id);
  std::unique_lock ex(exec_mu_);
  removers_.fetch_sub(1);
  std::unique_ptr<Queue> gone;
  std::lock_guard lk(mu_);
  for (auto it = queues_.begin(); it != queues_.end(); ++it)
    if ((*it)->d.id == id) {
      gone = std::move(*it);
      queues_.erase(it);
      list_gen_.fetch_add(1);
      return;
    }
}

void Engine::kick() {
  kicks_.fetch_add(1, std::memory_order_release);
  {
    std::lock_guard lk(mu_);
  }
  cv_.notify_one();
}

uint64_t Engine::timestamp() const {
  uint64_t ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count());
  if (timestamp_hz_ == 100'000'000) return ns / 10;
  return uint64_t((unsigned __int128)ns * timestamp_hz_ / 1'000'000'000u);
}

std::string Engine::ib_positions() {
  std::string out;
  std::lock_guard lk(mu_);
  for (const auto& q : queues_)
    if (q->waits_in_ib.load(std::memory_order_acquire))
      out += strf("queue %u: IB 0x%llx %u dwords, at dword %u\n", q->d.id,
                  ull(q->wait_ib_va.load(std::memory_order_relaxed)),
                  q->wait_ib_size.load(std::memory_order_relaxed),
                  q->wait_ib_pos.load(std::memory_order_relaxed));
  return out;
}

void Engine::run() {
  using clock = std::chrono::steady_clock;
  auto last = clock::now();
  auto sleep = std::chrono::microseconds(kMinSleep);
  uint64_t seen_kicks = kicks_.load(std::memory_order_acquire);
  while (!stop_.load(std::memory_order_relaxed)) {
    while (removers_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
    if (pass()) {
      last = clock::now();
      sleep = kMinSleep;
      continue;
    }
    uint64_t k = kicks_.load(std::memory_order_acquire);
    if (k != seen_kicks) {
      seen_kicks = k;
      last = clock::now();
      sleep = kMinSleep;
      continue;
    }
    if (clock::now() - last < kSpinAfterActivity) {
      for (int i = 0; i < 16; i++) cpu_relax();
      continue;
    }
    std::unique_lock lk(mu_);
    bool woken = cv_.wait_for(lk, sleep, [&] {
      return stop_.load(std::memory_order_relaxed) ||
             kicks_.load(std::memory_order_acquire) != seen_kicks;
    });
    if (!woken) sleep = std::min<std::chrono::microseconds>(sleep * 2, kMaxSleep);
  }
}

bool Engine::pass() {
  std::lock_guard ex(exec_mu_);
  graveyard_.clear();
  uint64_t gen = list_gen_.load(std::memory_order_acquire);
  if (gen != seen_gen_) {
    std::lock_guard lk(mu_);
    listed_.clear();
    for (auto& q : queues_) listed_.push_back(q.get());
    active_ = listed_;
    seen_gen_ = list_gen_.load(std::memory_order_relaxed);
  }
  // HCQ_EMU_INTERLEAVE_SEED: a random order each pass, drawn from the list's own order so an
  // idle pass, which gives its numbers back, leaves the next one as it would have been.
  const uint64_t mark = interleave_.mark();
  if (interleave_.on()) {
    active_ = listed_;
    interleave_.shuffle(active_);
  }
  bool progress = false;
  for (size_t i = 0; i < active_.size(); i++) {
    Queue& q = *active_[i];
    if (!q.removed && !q.dead) progress |= step(q);
  }
  if (!progress) interleave_.rewind(mark);
  return progress;
}

void Engine::fail(Queue& q, bool memory_fault, uint64_t address, const std::string& what) {
  q.dead = true;
  events_.fault(q.d.id, memory_fault, address, q.name() + ": " + what);
}

bool Engine::step(Queue& q) {
  uint64_t wptr = __atomic_load_n(q.d.doorbell, __ATOMIC_ACQUIRE);
  if (wptr == q.pos && q.depth == 0) return false;
  try {
    if (wptr < q.pos || wptr - q.pos > (q.pm4 ? q.d.ring_bytes / 4 : q.d.ring_bytes))
      bad(strf("doorbell 0x%llx is behind or more than a ring ahead of the read pointer 0x%llx",
               ull(wptr), ull(q.pos)));
    return q.pm4 ? step_pm4(q, wptr) : step_sdma(q, wptr);
  } catch (const QueueFault& f) {
    fail(q, f.memory, f.address, f.what);
  } catch (const Fault& f) {
    fail(q, true, f.address(), strf("%s %s: ", q.cur_name, q.where().c_str()) + f.what());
  } catch (const std::exception& e) {
    fail(q, false, 0, strf("%s %s: ", q.cur_name, q.where().c_str()) + e.what());
  }
  return true;
}

// ------------------------------------------------------------------------------------------
// The submitted part of a ring

namespace {

// Dwords [from, from + dwords) of a ring, modulo its size, as host memory: a step reads only
// what was submitted, so only those pages are translated (the register-level GPU walks its page
// tables per page: a whole 1 MiB ring is 256 walks a step; docs/performance.md). add_queue has
// checked the whole ring once.
class SubmittedRing {
 public:
  SubmittedRing(GpuAddressSpace& mem, uint64_t ring_va, uint64_t ring_dwords, uint64_t from,
                uint64_t dwords)
      : from_(from), head_dwords_(std::min(dwords, ring_dwords - from)) {
    if (head_dwords_)
      head_ = static_cast<const uint32_t*>(mem.translate(ring_va + from * 4, head_dwords_ * 4));
    if (dwords > head_dwords_)
      tail_ = static_cast<const uint32_t*>(mem.translate(ring_va, (dwords - head_dwords_) * 4));
  }
  // Dword `off` of the ring; it must lie in the submitted part.
  const uint32_t* at(uint64_t off) const {
    return off - from_ < head_dwords_ ? head_ + (off - from_) : tail_ + off;
  }

 private:
  uint64_t from_, head_dwords_;
  const uint32_t* head_ = nullptr;  // from `from` up to the ring's end at most
  const uint32_t* tail_ = nullptr;  // the rest, from the ring's start
};

}  // namespace

// ------------------------------------------------------------------------------------------
// PM4

bool Engine::step_pm4(Queue& q, uint64_t wptr) {
  const uint64_t ring_dw = q.d.ring_bytes / 4;
  q.cur_name = "ring";
  q.cur_in_ib = false;
  q.cur_off = (q.pos % ring_dw) * 4;
  const SubmittedRing ring(mem_, q.d.ring_va, ring_dw, q.pos % ring_dw, wptr - q.pos);
  auto* rptr = static_cast<uint64_t*>(mem_.translate(q.d.rptr_va, 8));
  for (int i = 0; i < q.depth; i++) {
    q.cur_name = "INDIRECT_BUFFER";
    q.ib[i].host = static_cast<const uint32_t*>(mem_.translate(q.ib[i].va, uint64_t{q.ib[i].size} * 4));
  }
  bool progress = false;
  for (int budget = interleave_.turn(kPacketsPerTurn); budget > 0; budget--) {
    if (q.depth > 0) {
      Queue::Ib& ib = q.ib[q.depth - 1];
      if (ib.pos == ib.size) {  // return from the IB
        uint32_t len = ib.caller_len;
        if (--q.depth > 0) {
          q.ib[q.depth - 1].pos += len;
        } else {
          q.pos += len;
          store_release(rptr, q.pos);
        }
        progress = true;
        continue;
      }
      q.cur_in_ib = true;
      q.cur_ib_va = ib.va;
      q.cur_off = uint64_t{ib.pos} * 4;
      const uint32_t* p = ib.host + ib.pos;
      const uint32_t avail = ib.size - ib.pos;
      const uint32_t h = p[0];
      const uint32_t len = pm4::packet_dwords(h);  // the framing the decoder uses
      if (len > avail)
        bad(strf("PM4 packet (header 0x%08X) %s runs past the end of the IB (%u dwords left)", h,
                 q.where().c_str(), avail));
      Res r = exec_pm4(q, p, len);
      if (r == Res::Blocked) {
        q.publish_wait(ib);
        return progress;
      }
      q.waits_in_ib.store(false, std::memory_order_relaxed);
      if (r == Res::Done) ib.pos += len;  // Called: advanced when the callee returns
      progress = true;
      continue;
    }
    if (q.pos == wptr) break;
    const uint64_t off = q.pos % ring_dw;
    q.cur_in_ib = false;
    q.cur_off = off * 4;
    const uint32_t h = *ring.at(off);
    const uint64_t len = pm4::packet_dwords(h);  // the framing the decoder uses
    if (len > ring_dw)
      bad(strf("PM4 packet (header 0x%08X) %s is longer than the ring", h, q.where().c_str()));
    if (len > wptr - q.pos) break;  // the rest of the packet is not submitted yet
    const uint32_t* p = ring.at(off);
    if (off + len > ring_dw) {  // wraps the ring end: make it contiguous
      uint64_t first = ring_dw - off;
      std::memcpy(q.scratch.data(), ring.at(off), first * 4);
      std::memcpy(q.scratch.data() + first, ring.at(0), (len - first) * 4);
      p = q.scratch.data();
    }
    Res r = exec_pm4(q, p, uint32_t(len));
    if (r == Res::Blocked) break;
    progress = true;
    if (r == Res::Done) {
      q.pos += len;
      store_release(rptr, q.pos);
    }
  }
  return progress;
}

Engine::Res Engine::exec_pm4(Queue& q, const uint32_t* p, uint32_t len) {
  const uint32_t h = p[0];
  switch (pm4::header_type(h)) {
    case pm4::V_HEADER_TYPE_TYPE2_FILLER: q.cur_name = "type-2 filler"; return Res::Done;
    case pm4::V_HEADER_TYPE_TYPE3: break;
    default:
      q.cur_name = "?";
      bad(strf("PM4 type-%u packet %s (header 0x%08X): only type-3 packets are supported",
               pm4::header_type(h), q.where().c_str(), h));
  }
  const uint32_t op = pm4::header_opcode(h);
  const PacketInfo* info = pm4_info_[op];
  if (!info) {
    const PacketInfo* other_gen = pm4::find(uint8_t(op));  // described, not for this gen
    bad(strf("unknown PM4 opcode 0x%02X %s (header 0x%08X)%s%s%s", op, q.where().c_str(), h,
             other_gen ? ": " : "", other_gen ? other_gen->name : "",
             other_gen ? (std::string(" is not a ") + to_string(gen_) + " packet").c_str() : ""));
  }
  q.cur_name = info->name;
  const uint32_t body = len - 1;
  if (pm4_exact_[op] ? body != pm4_body_[op] : body < pm4_body_[op])
    bad(strf("PM4 %s %s has %u body dwords; %s %u on %s", info->name, q.where().c_str(), body,
             pm4_exact_[op] ? "expected" : "needs at least", pm4_body_[op], to_string(gen_)));
  using namespace pm4;
  switch (op) {
    case NOP:
    case EVENT_WRITE:   // a pipeline flush: everything before it has already completed
    case ACQUIRE_MEM:   // a cache invalidate: the emulated GPU has no caches
      return Res::Done;

    case SET_SH_REG: {
      uint32_t reg = SET_SH_REG_REG_OFFSET.get(p), n = len - SET_SH_REG_VALUES;
      if (reg + n > kShRegs)
        bad(strf("SET_SH_REG %s writes registers 0x%X..0x%X outside the SH window [0x%X, 0x%X)",
                 q.where().c_str(), kShRegBase + reg, kShRegBase + reg + n - 1, kShRegBase,
                 kShRegBase + kShRegs));
      std::memcpy(q.sh.data() + reg, p + SET_SH_REG_VALUES, n * 4);
      return Res::Done;
    }
    case SET_UCONFIG_REG: {
      uint32_t reg = SET_UCONFIG_REG_REG_OFFSET.get(p), n = len - SET_UCONFIG_REG_VALUES;
      if (reg + n > kUconfigRegs)
        bad(strf("SET_UCONFIG_REG %s writes past register 0x%X", q.where().c_str(),
                 kUconfigRegBase + kUconfigRegs - 1));
      if (q.uconfig.empty()) q.uconfig.resize(kUconfigRegs);
      std::memcpy(q.uconfig.data() + reg, p + SET_UCONFIG_REG_VALUES, n * 4);
      return Res::Done;
    }

    case DISPATCH_DIRECT:
      dispatch(q, p);
      return Res::Done;

    case RELEASE_MEM: {
      uint32_t data_sel = RELEASE_MEM_DATA_SEL.get(p), int_sel = RELEASE_MEM_INT_SEL.get(p);
      uint32_t dst_sel = RELEASE_MEM_DST_SEL.get(p);
      if (data_sel > V_RELEASE_MEM_DATA_SEL_SEND_GPU_CLOCK_COUNTER || int_sel > kMaxIntSel || dst_sel > kMaxDstSel)
        bad(strf("RELEASE_MEM %s: unsupported DATA_SEL %u / INT_SEL %u / DST_SEL %u",
                 q.where().c_str(), data_sel, int_sel, dst_sel));
      uint64_t va = addr64(RELEASE_MEM_ADDRESS_LO.get(p), RELEASE_MEM_ADDRESS_HI.get(p));
      if (data_sel == V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW) {
        check_align(va, 4, "RELEASE_MEM");
        store_release(static_cast<uint32_t*>(mem_.translate(va, 4)), RELEASE_MEM_DATA_LO.get(p));
      } else if (data_sel == V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA ||
                 data_sel == V_RELEASE_MEM_DATA_SEL_SEND_GPU_CLOCK_COUNTER) {
        check_align(va, 8, "RELEASE_MEM");
        auto* dst = static_cast<uint64_t*>(mem_.translate(va, 8));
        store_release(dst, data_sel == V_RELEASE_MEM_DATA_SEL_SEND_GPU_CLOCK_COUNTER
                               ? timestamp()
                               : addr64(RELEASE_MEM_DATA_LO.get(p), RELEASE_MEM_DATA_HI.get(p)));
      }
      if (release_mem_interrupts(int_sel))
        events_.queue_interrupt(q.d.id, RELEASE_MEM_INT_CTXID.get(p));
      return Res::Done;
    }

    case WAIT_REG_MEM:
    case WAIT_REG_MEM64: {
      const bool w64 = op == WAIT_REG_MEM64;
      uint32_t func = w64 ? WAIT_REG_MEM64_FUNCTION.get(p) : WAIT_REG_MEM_FUNCTION.get(p);
      uint32_t space = w64 ? WAIT_REG_MEM64_MEM_SPACE.get(p) : WAIT_REG_MEM_MEM_SPACE.get(p);
      if (space != V_WAIT_REG_MEM_MEM_SPACE_MEMORY || func > kMaxCompareFunction)
        bad(strf("%s %s: unsupported MEM_SPACE %u / FUNCTION %u (memory waits only)", info->name,
                 q.where().c_str(), space, func));
      uint64_t va, ref, mask, v;
      if (w64) {
        va = addr64(WAIT_REG_MEM64_ADDRESS_LO.get(p), WAIT_REG_MEM64_ADDRESS_HI.get(p));
        ref = addr64(WAIT_REG_MEM64_REFERENCE_LO.get(p), WAIT_REG_MEM64_REFERENCE_HI.get(p));
        mask = addr64(WAIT_REG_MEM64_MASK_LO.get(p), WAIT_REG_MEM64_MASK_HI.get(p));
        check_align(va, 8, info->name);
        v = __atomic_load_n(static_cast<const uint64_t*>(mem_.translate(va, 8)), __ATOMIC_ACQUIRE);
      } else {
        va = addr64(WAIT_REG_MEM_ADDRESS_LO.get(p), WAIT_REG_MEM_ADDRESS_HI.get(p));
        ref = WAIT_REG_MEM_REFERENCE.get(p);
        mask = WAIT_REG_MEM_MASK.get(p);
        check_align(va, 4, info->name);
        v = __atomic_load_n(static_cast<const uint32_t*>(mem_.translate(va, 4)), __ATOMIC_ACQUIRE);
      }
      return compare(func, v & mask, ref) ? Res::Done : Res::Blocked;
    }

    case INDIRECT_BUFFER: {
      if (!INDIRECT_BUFFER_VALID.get(p))
        bad(strf("INDIRECT_BUFFER %s is not marked VALID", q.where().c_str()));
      uint64_t va = addr64(INDIRECT_BUFFER_IB_BASE_LO.get(p), INDIRECT_BUFFER_IB_BASE_HI.get(p));
      uint32_t size = INDIRECT_BUFFER_IB_SIZE.get(p);
      check_align(va, 4, "INDIRECT_BUFFER");
      auto* host = static_cast<const uint32_t*>(mem_.translate(va, uint64_t{size} * 4));
      // A chained IB inside an IB replaces it (no return); elsewhere an IB is a call.
      if (q.depth > 0 && INDIRECT_BUFFER_CHAIN.get(p)) {
        Queue::Ib& top = q.ib[q.depth - 1];
        top = {va, size, 0, top.caller_len, host};
        return Res::Called;
      }
      if (q.depth == kPm4MaxIbDepth)
        bad(strf("INDIRECT_BUFFER %s nests deeper than %d levels", q.where().c_str(),
                 kPm4MaxIbDepth));
      q.ib[q.depth++] = {va, size, 0, len, host};
      return Res::Called;
    }
  }
  bad(strf("PM4 %s %s is not executed by the emulated GPU", info->name, q.where().c_str()));
}

void Engine::dispatch(Queue& q, const uint32_t* p) {
  using namespace regs;
  const uint64_t entry =
      addr64(q.sh_reg(COMPUTE_PGM_LO_ALL.address),
             COMPUTE_PGM_HI_DATA_ALL.get(q.sh_reg(COMPUTE_PGM_HI_ALL.address)))
      << kPgmAddressShift;
  auto [base, size] = mem_.mapping_of(entry);
  if (size == 0)
    throw QueueFault{true, entry,
                     strf("DISPATCH_DIRECT %s: no kernel at 0x%llx (the address is not mapped)",
                          q.where().c_str(), ull(entry))};
  auto& cache = kernels_->by_entry;
  auto it = cache.find(entry);
  if (it != cache.end()) {
    // Still the same kernel? The mapping and its 64-byte descriptor must be unchanged.
    const auto& e = it->second;
    if (e.map_base != base || e.map_size != size ||
        std::memcmp(mem_.translate(e.desc_va, KernelDescriptor::kBytes), e.desc,
                    KernelDescriptor::kBytes) != 0) {
      cache.erase(it);
      it = cache.end();
    }
  }
  if (it == cache.end()) {
    KernelCache::Entry e{};
    auto* image = static_cast<const std::byte*>(mem_.translate(base, size));
    bool found = find_kernel_at(image, size, entry - base, e.name, e.kd);
    // A GPU that knows only page tables (the register-level AM GPU) gives a run of mapped
    // pages that may start in a buffer before the code object: try each page-aligned ELF
    // header at or below the entry's page.
    constexpr uint64_t kPage = 4096;
    for (uint64_t at = (entry - base) & ~(kPage - 1); !found && at > 0; at -= kPage)
      if (std::memcmp(image + at, "\x7f" "ELF", 4) == 0)
        found = find_kernel_at(image + at, size - at, entry - base - at, e.name, e.kd);
    if (!found)
      bad(strf("DISPATCH_DIRECT %s: no kernel at 0x%llx (no kernel descriptor in the code "
               "object mapped at [0x%llx, 0x%llx) points there)",
               q.where().c_str(), ull(entry), ull(base), ull(base + size)));
    e.fn = hcq::emu::find_kernel(e.name);
    if (!e.fn)
      bad(strf("DISPATCH_DIRECT %s: no CPU implementation registered for kernel '%s'",
               q.where().c_str(), e.name.c_str()));
    e.map_base = base;
    e.map_size = size;
    e.desc_va = entry - uint64_t(e.kd.kernel_code_entry_byte_offset);
    std::memcpy(e.desc, mem_.translate(e.desc_va, KernelDescriptor::kBytes),
                KernelDescriptor::kBytes);
    it = cache.emplace(entry, std::move(e)).first;
  }
  const KernelCache::Entry& k = it->second;

  hcq::emu::Dispatch d;
  d.grid = {pm4::DISPATCH_DIRECT_DIM_X.get(p), pm4::DISPATCH_DIRECT_DIM_Y.get(p),
            pm4::DISPATCH_DIRECT_DIM_Z.get(p)};
  d.block = {num_thread_full(0, gen_).get(q.sh_reg(COMPUTE_NUM_THREAD_X_ALL.address)),
             num_thread_full(1, gen_).get(q.sh_reg(COMPUTE_NUM_THREAD_Y_ALL.address)),
             num_thread_full(2, gen_).get(q.sh_reg(COMPUTE_NUM_THREAD_Z_ALL.address))};
  if (d.block.count() == 0)
    bad(strf("DISPATCH_DIRECT %s: kernel '%s' with a workgroup of %ux%ux%u threads "
             "(COMPUTE_NUM_THREAD_X/Y/Z not set)",
             q.where().c_str(), k.name.c_str(), d.block.x, d.block.y, d.block.z));
  d.memory = &mem_;
  const int sgpr = k.kd.kernarg_sgpr();
  if (sgpr >= 0) {
    if (uint32_t(sgpr) + 1 >= kUserDataRegs)
      bad(strf("DISPATCH_DIRECT %s: kernel '%s' wants its kernarg pointer in user SGPR %d",
               q.where().c_str(), k.name.c_str(), sgpr));
    const uint32_t ud = COMPUTE_USER_DATA_0_ALL.address + uint32_t(sgpr);
    const uint64_t kva = addr64(q.sh_reg(ud), q.sh_reg(ud + 1));
    d.kernarg_size = k.kd.kernarg_size;
    d.kernargs = static_cast<const std::byte*>(mem_.translate(kva, d.kernarg_size));
  }
  if (d.grid.count() == 0) return;
  d.abandon = preemption_.flag();
  auto running = preemption_.run(q.d.id);
  try {
    (*k.fn)(d);
  } catch (const Fault& f) {
    throw QueueFault{true, f.address(),
                     strf("kernel '%s' (DISPATCH_DIRECT %s): ", k.name.c_str(),
                          q.where().c_str()) + f.what()};
  } catch (const std::exception& e) {
    bad(strf("kernel '%s' (DISPATCH_DIRECT %s) failed: ", k.name.c_str(), q.where().c_str()) +
        e.what());
  } catch (...) {
    bad(strf("kernel '%s' (DISPATCH_DIRECT %s) failed with an unknown exception",
             k.name.c_str(), q.where().c_str()));
  }
  std::atomic_thread_fence(std::memory_order_release);
}

// ------------------------------------------------------------------------------------------
// SDMA

bool Engine::step_sdma(Queue& q, uint64_t wptr) {
  const uint64_t ring_bytes = q.d.ring_bytes;
  q.cur_name = "ring";
  q.cur_in_ib = false;
  q.cur_off = q.pos % ring_bytes;
  if ((wptr | q.pos) & 3)
    bad(strf("doorbell 0x%llx (bytes) is not a multiple of 4", ull(wptr)));
  const SubmittedRing ring(mem_, q.d.ring_va, ring_bytes / 4, q.pos % ring_bytes / 4,
                           (wptr - q.pos) / 4);
  auto* rptr = static_cast<uint64_t*>(mem_.translate(q.d.rptr_va, 8));
  if (q.depth > 0) {
    q.cur_name = "INDIRECT";
    q.ib[0].host = static_cast<const uint32_t*>(mem_.translate(q.ib[0].va, uint64_t{q.ib[0].size} * 4));
  }
  // The framing the decoder uses; unknown ops (one dword) fault in exec_sdma.
  auto length = [&](const uint32_t* p, uint64_t avail) -> uint64_t {
    return sdma::packet_dwords(p, avail, sdma_info_[sdma::header_op(p[0])]);
  };
  bool progress = false;
  for (int budget = interleave_.turn(kPacketsPerTurn); budget > 0; budget--) {
    if (q.depth > 0) {
      Queue::Ib& ib = q.ib[0];
      if (ib.pos == ib.size) {
        q.depth = 0;
        q.pos += uint64_t{ib.caller_len} * 4;
        store_release(rptr, q.pos);
        progress = true;
        continue;
      }
      q.cur_in_ib = true;
      q.cur_ib_va = ib.va;
      q.cur_off = uint64_t{ib.pos} * 4;
      const uint32_t* p = ib.host + ib.pos;
      const uint32_t avail = ib.size - ib.pos;
      uint64_t len = length(p, avail);
      if (len > avail)
        bad(strf("SDMA packet (header 0x%08X) %s runs past the end of the IB (%u dwords left)",
                 p[0], q.where().c_str(), avail));
      Res r = exec_sdma(q, p, uint32_t(len));
      if (r == Res::Blocked) {
        q.publish_wait(ib);
        return progress;
      }
      q.waits_in_ib.store(false, std::memory_order_relaxed);
      progress = true;
      if (r == Res::Done) ib.pos += uint32_t(len);  // Called: exec_sdma moved it
      continue;
    }
    if (q.pos == wptr) break;
    const uint64_t off = q.pos % ring_bytes;
    q.cur_in_ib = false;
    q.cur_off = off;
    const uint32_t* p = ring.at(off / 4);
    const uint64_t avail = (wptr - q.pos) / 4;
    const uint64_t to_end = (ring_bytes - off) / 4;
    uint64_t len = length(p, std::min(avail, to_end));
    if (len > to_end)
      bad(strf("SDMA packet (header 0x%08X) %s crosses the ring end (%llu dwords, %llu left "
               "before the end)",
               p[0], q.where().c_str(), ull(len), ull(to_end)));
    if (len > avail) break;  // not all submitted yet
    Res r = exec_sdma(q, p, uint32_t(len));
    if (r == Res::Blocked) break;
    progress = true;
    if (r == Res::Done) {
      q.pos += len * 4;
      store_release(rptr, q.pos);
    }
  }
  return progress;
}

Engine::Res Engine::exec_sdma(Queue& q, const uint32_t* p, uint32_t len) {
  using namespace sdma;
  const uint32_t h = p[0];
  const uint32_t op = header_op(h), sub = header_sub_op(h);
  const PacketInfo* info = sdma_info_[op];
  if (!info || info->sub_op != sub)
    bad(strf("unknown SDMA op %u sub-op %u %s (header 0x%08X)", op, sub, q.where().c_str(), h));
  q.cur_name = info->name;
  switch (op) {
    case NOP: return Res::Done;

    case COPY_LINEAR: {
      const Field count = copy_count_field(gen_);
      uint64_t n = uint64_t{count.get(p)} + 1;
      uint64_t src = addr64(COPY_LINEAR_SRC_ADDR_LO_ALL.get(p), COPY_LINEAR_SRC_ADDR_HI_ALL.get(p));
      uint64_t dst = addr64(COPY_LINEAR_DST_ADDR_LO_ALL.get(p), COPY_LINEAR_DST_ADDR_HI_ALL.get(p));
      const void* s = mem_.translate(src, n);
      void* d = mem_.translate(dst, n);
      std::memmove(d, s, n);
      std::atomic_thread_fence(std::memory_order_release);
      return Res::Done;
    }

    case WRITE_LINEAR: {
      uint64_t dst = addr64(WRITE_LINEAR_DST_ADDR_LO_ALL.get(p), WRITE_LINEAR_DST_ADDR_HI_ALL.get(p));
      check_align(dst, 4, "WRITE_LINEAR");
      const uint64_t n = len - info->tail_at;  // the data tail
      std::memcpy(mem_.translate(dst, n * 4), p + info->tail_at, n * 4);
      std::atomic_thread_fence(std::memory_order_release);
      return Res::Done;
    }

    case INDIRECT: {
      if (q.depth >= kSdmaMaxIbDepth)
        bad(strf("INDIRECT %s inside an indirect buffer", q.where().c_str()));
      uint64_t va = addr64(INDIRECT_IB_BASE_LO_ALL.get(p), INDIRECT_IB_BASE_HI_ALL.get(p));
      uint32_t size = INDIRECT_IB_SIZE_ALL.get(p);
      check_align(va, 32, "INDIRECT");
      auto* host = static_cast<const uint32_t*>(mem_.translate(va, uint64_t{size} * 4));
      q.ib[q.depth++] = {va, size, 0, len, host};
      return Res::Called;
    }

    case FENCE: {
      uint64_t va = addr64(FENCE_ADDR_LO_ALL.get(p), FENCE_ADDR_HI_ALL.get(p));
      check_align(va, 4, "FENCE");
      store_release(static_cast<uint32_t*>(mem_.translate(va, 4)), FENCE_DATA_ALL.get(p));
      return Res::Done;
    }

    case TRAP:
      events_.queue_interrupt(q.d.id, TRAP_INT_CONTEXT_ALL.get(p));
      return Res::Done;

    case POLL_REGMEM: {
      uint32_t func = POLL_REGMEM_FUNC_ALL.get(p);
      if (!POLL_REGMEM_MEM_POLL_ALL.get(p) || POLL_REGMEM_HDP_FLUSH_ALL.get(p) ||
          func > kMaxCompareFunction)
        bad(strf("POLL_REGMEM %s: unsupported MEM_POLL %u / HDP_FLUSH %u / FUNC %u (memory "
                 "polls only)",
                 q.where().c_str(), POLL_REGMEM_MEM_POLL_ALL.get(p), POLL_REGMEM_HDP_FLUSH_ALL.get(p),
                 func));
      uint64_t va = addr64(POLL_REGMEM_ADDR_LO_ALL.get(p), POLL_REGMEM_ADDR_HI_ALL.get(p));
      check_align(va, 4, "POLL_REGMEM");
      uint32_t v =
          __atomic_load_n(static_cast<const uint32_t*>(mem_.translate(va, 4)), __ATOMIC_ACQUIRE);
      return compare(func, v & POLL_REGMEM_MASK_ALL.get(p), POLL_REGMEM_VALUE_ALL.get(p))
                 ? Res::Done
                 : Res::Blocked;
    }

    case COND_EXE: {
      uint64_t va = addr64(COND_EXE_ADDR_LO_ALL.get(p), COND_EXE_ADDR_HI_ALL.get(p));
      check_align(va, 4, "COND_EXE");
      uint32_t v =
          __atomic_load_n(static_cast<const uint32_t*>(mem_.translate(va, 4)), __ATOMIC_ACQUIRE);
      if (v == COND_EXE_REFERENCE_ALL.get(p)) return Res::Done;
      // Skip the next EXEC_COUNT dwords together with this packet.
      uint64_t skip = COND_EXE_EXEC_COUNT_ALL.get(p);
      if (q.depth > 0) {
        Queue::Ib& ib = q.ib[0];
        if (ib.pos + len + skip > ib.size)
          bad(strf("COND_EXE %s skips %llu dwords past the end of the IB", q.where().c_str(),
                   ull(skip)));
        ib.pos += uint32_t(len + skip);
      } else {
        uint64_t wptr = __atomic_load_n(q.d.doorbell, __ATOMIC_ACQUIRE);
        if (q.pos + (len + skip) * 4 > wptr) return Res::Blocked;  // not all submitted yet
        q.pos += (len + skip) * 4;
        store_release(static_cast<uint64_t*>(mem_.translate(q.d.rptr_va, 8)), q.pos);
      }
      return Res::Called;  // position already advanced
    }

    case TIMESTAMP: {
      uint64_t va = addr64(TIMESTAMP_ADDR_LO_ALL.get(p), TIMESTAMP_ADDR_HI_ALL.get(p));
      check_align(va, 8, "TIMESTAMP");
      store_release(static_cast<uint64_t*>(mem_.translate(va, 8)), timestamp());
      return Res::Done;
    }
  }
  bad(strf("SDMA %s %s is not executed by the emulated GPU", info->name, q.where().c_str()));
}

}  // namespace hcq::amd::emu
