// The emulated NVIDIA GPU's front end. One thread watches the doorbell and every channel's
// GP_PUT, runs the GPFIFO entries between GP_GET and GP_PUT, and writes GP_GET back after
// each entry. Methods are checked against classes.def: a method the description does not
// name stops the channel.
#include "nv/emu/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <unordered_map>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/error.hpp"
#include "emu/kernels.hpp"
#include "nv/cubin.hpp"
#include "nv/rm_abi.hpp"

namespace hcq::nv::emu {

using hcq::emu::Fault;

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// A channel error that is not a memory fault: a bad method, QMD or GPFIFO entry.
struct ChannelError {
  std::string what;
  uint32_t rc;
};
[[noreturn]] void bad(std::string what, uint32_t rc = kRcGrException) {
  throw ChannelError{std::move(what), rc};
}

// USERD's GP_GET and GP_PUT, and the error notifier's words, where the ABI header places them.
constexpr uint64_t kGpGet = offsetof(rm::Userd, GPGet), kGpPut = offsetof(rm::Userd, GPPut);
// USERD's push buffer get pointer (clc56f.h Get, GetHi: read-only to software): the byte
// address of the method header the engine is on, written where it waits.
constexpr uint64_t kGet = offsetof(rm::Userd, Get), kGetHi = offsetof(rm::Userd, GetHi);
constexpr uint64_t kGpfifoEntryBytes = sizeof(uint64_t);
constexpr uint32_t kMethodDwords = 0x4000 / 4;    // a class's method space
// Methods below this offset belong to the host on every subchannel (clc56f.h: the host's
// methods end at 0x100, the engine classes' start there).
constexpr uint16_t kHostMethodsEnd = 0x100;
constexpr int kEntriesPerTurn = 64;
constexpr uint32_t kFetchDwords = 1024;  // the emulated PBDMA's look-ahead
constexpr auto kSpinAfterActivity = std::chrono::microseconds(200);
constexpr auto kMinSleep = std::chrono::microseconds(50);
constexpr auto kMaxSleep = std::chrono::microseconds(500);
// Threads a CTA may have (every generation hcq emulates).
constexpr uint64_t kMaxCtaThreads = 1024;

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

template <class T>
T load(const Memory& m, uint64_t va) {
  T v;
  std::memcpy(&v, m.translate(va, sizeof(T)), sizeof(T));
  return v;
}
template <class T>
void store(const Memory& m, uint64_t va, T v) {
  void* p = m.translate(va, sizeof(T));
  if constexpr (sizeof(T) == 8)
    __atomic_store_n(static_cast<uint64_t*>(p), uint64_t(v), __ATOMIC_RELEASE);
  else if constexpr (sizeof(T) == 4)
    __atomic_store_n(static_cast<uint32_t*>(p), uint32_t(v), __ATOMIC_RELEASE);
  else
    __atomic_store_n(static_cast<uint16_t*>(p), uint16_t(v), __ATOMIC_RELEASE);
}

}  // namespace

// Kernels found from program addresses. An entry holds while the same mapping is there and
// the code at the address is unchanged (a freed cubin's address may be reused).
struct Engine::KernelCache {
  struct Entry {
    std::string name;
    uint32_t param_base = 0, param_bytes = 0;
    const hcq::emu::KernelFn* fn = nullptr;
    uint64_t map_base = 0, map_size = 0;
    uint8_t code[16] = {};
  };
  std::unordered_map<uint64_t, Entry> by_program;
};

struct Engine::Channel {
  ChannelDesc d;
  bool dead = false;
  bool rung = false;     // a doorbell was seen since the channel went idle
  uint32_t gp_get = 0;   // next GPFIFO entry to fetch
  // The segment being executed: its entry, its words, the next header, and the data dword of
  // that header to resume at (a blocked acquire is retried).
  bool in_segment = false;
  uint32_t entry = 0;
  uint64_t seg_va = 0;
  uint32_t seg_dwords = 0, pos = 0, resume = 0;
  int turn_left = 0;  // method headers this turn may still run (Interleaver::turn)
  // Like a PBDMA, the engine fetches a segment's last kFetchDwords ahead of executing them
  // and then moves GP_GET past the entry: a channel waiting on an acquire near a segment's
  // end has GP_GET past it (as an H200 showed). The fetched words run from here.
  bool fetched = false;
  uint32_t fetched_from = 0;
  std::vector<uint32_t> fetch;
  Group sub_group[8] = {};
  bool sub_bound[8] = {};
  std::vector<uint32_t> regs[8];  // method values by subchannel
  // Compute inline-to-memory transfer in progress.
  uint64_t inline_dst = 0, inline_left = 0;
  uint32_t reg(uint32_t sub, uint16_t m) const { return regs[sub][m / 4]; }
  uint64_t reg64(uint32_t sub, uint16_t hi_m, uint16_t lo_m) const {
    return uint64_t(reg(sub, hi_m)) << 32 | reg(sub, lo_m);
  }
};

Engine::Engine(const GpuClasses& classes, Memory& memory, GpuEvents& events)
    : classes_(classes), mem_(memory), events_(events),
      kernels_(std::make_unique<KernelCache>()) {
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

void Engine::add_channel(const ChannelDesc& d) {
  if (d.entries == 0 || d.gpfifo_va % 8 || d.userd_va % 4)
    throw InvalidInput("emulated GPU: cannot add " + d.name + ": GPFIFO at " + hex(d.gpfifo_va) +
                       " with " + std::to_string(d.entries) + " entries, USERD at " +
                       hex(d.userd_va));
  auto c = std::make_unique<Channel>();
  c->d = d;
  for (auto& r : c->regs) r.assign(kMethodDwords, 0);
  std::lock_guard ex(exec_mu_);
  channels_.push_back(std::move(c));
}

void Engine::remove_channel(uint32_t id) {
  preemption_.abandon(id);  // RM preempts a channel it frees: a kernel of it stops
  std::lock_guard ex(exec_mu_);
  std::erase_if(channels_, [&](auto& c) { return c->d.id == id; });
}

void Engine::watch_doorbell(volatile uint32_t* reg) {
  std::lock_guard ex(exec_mu_);
  doorbell_ = reg;
}

uint64_t Engine::timestamp() const { return now_ns(); }

void Engine::run() {
  using clock = std::chrono::steady_clock;
  auto last = clock::now();
  auto sleep = kMinSleep;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (pass()) {
      last = clock::now();
      sleep = kMinSleep;
      continue;
    }
    if (clock::now() - last < kSpinAfterActivity) {
      for (int i = 0; i < 16; i++) cpu_relax();
      continue;
    }
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, sleep, [&] { return stop_.load(std::memory_order_relaxed); });
    sleep = std::min<std::chrono::microseconds>(sleep * 2, kMaxSleep);
  }
}

bool Engine::pass() {
  std::lock_guard ex(exec_mu_);
  // A doorbell write says "look at your channels"; which token it carried does not matter to
  // the emulation (several may land before the engine looks), only that one came.
  if (doorbell_ && *doorbell_ != kDoorbellIdle) {
    *doorbell_ = kDoorbellIdle;
    for (auto& c : channels_) c->rung = true;
  }
  order_.clear();
  for (auto& c : channels_) order_.push_back(c.get());
  const uint64_t mark = interleave_.mark();
  interleave_.shuffle(order_);  // HCQ_EMU_INTERLEAVE_SEED: a random order each pass
  bool progress = false;
  for (Channel* c : order_)
    if (!c->dead && c->rung) progress |= step(*c);
  if (!progress) interleave_.rewind(mark);  // an idle pass draws nothing
  return progress;
}

void Engine::fail(Channel& c, uint32_t rc, const std::string& what) {
  c.dead = true;
  // The log first: a driver that sees the notifier's status reads the log at once, and must
  // find the error's detail there (it did not, now and then, on a loaded machine).
  events_.channel_error(c.d.id, rc, c.d.name + ": " + what);
  if (c.d.notifier_va) {
    try {  // the notifier's info32 and status, as RM writes them on a channel error
      const uint64_t n = c.d.notifier_va;
      store<uint32_t>(mem_, n + offsetof(rm::Notification, info32), rc);
      store<uint16_t>(mem_, n + offsetof(rm::Notification, info16), uint16_t(0));
      store<uint16_t>(mem_, n + offsetof(rm::Notification, status), kNotifierErrorStatus);
    } catch (const Fault&) {
    }
  }
}

bool Engine::step(Channel& c) {
  bool progress = false;
  c.turn_left = interleave_.turn(INT32_MAX);
  try {
    for (int n = 0; n < kEntriesPerTurn; n++) {
      if (!c.in_segment) {
        const uint32_t put = load<uint32_t>(mem_, c.d.userd_va + kGpPut);
        if (put >= c.d.entries)
          bad("GP_PUT " + std::to_string(put) + " is past the GPFIFO's " +
              std::to_string(c.d.entries) + " entries");
        if (put == c.gp_get) {
          c.rung = false;
          return progress;
        }
        const GpfifoEntry e =
            decode_gpfifo(load<uint64_t>(mem_, c.d.gpfifo_va + c.gp_get * kGpfifoEntryBytes));
        c.entry = c.gp_get;
        c.seg_va = e.address;
        c.seg_dwords = e.dwords;
        c.pos = c.resume = 0;
        c.fetched = false;
        c.in_segment = true;
      }
      const Res r = exec_segment(c);
      if (r == Res::Blocked) return progress;
      if (r == Res::Yield) return true;  // it ran a header of this turn at least
      c.in_segment = false;
      if (!c.fetched) fetch_rest(c);  // ended early, or its last method ran past the fetch point
      progress = true;
    }
  } catch (const ChannelError& e) {
    fail(c, e.rc, e.what);
  } catch (const Fault& f) {
    fail(c, kRcMmuFault, "MMU fault at " + hex(f.address()) + ": " + f.what());
  }
  return true;
}

void Engine::fetch_rest(Channel& c) {
  if (c.pos < c.seg_dwords) {
    const auto* w = static_cast<const uint32_t*>(
        mem_.translate(c.seg_va + uint64_t(c.pos) * 4, uint64_t(c.seg_dwords - c.pos) * 4));
    c.fetch.assign(w, w + (c.seg_dwords - c.pos));
  } else {
    c.fetch.clear();
  }
  c.fetched_from = c.pos;
  c.fetched = true;
  c.gp_get = (c.gp_get + 1) % c.d.entries;
  store<uint32_t>(mem_, c.d.userd_va + kGpGet, c.gp_get);
}

Engine::Res Engine::blocked_at(Channel& c) {
  const uint64_t get = c.seg_va + uint64_t(c.pos) * 4;
  store<uint32_t>(mem_, c.d.userd_va + kGet, uint32_t(get));
  store<uint32_t>(mem_, c.d.userd_va + kGetHi, uint32_t(get >> 32));
  return Res::Blocked;
}

Engine::Res Engine::exec_segment(Channel& c) {
  if (c.seg_dwords == 0) return Res::Done;  // a control entry: nothing to fetch
  const auto* mem = static_cast<const uint32_t*>(mem_.translate(c.seg_va, uint64_t(c.seg_dwords) * 4));
  // Dword i of the segment: from memory until the rest was fetched, then from the fetch.
  auto at = [&](uint32_t i) {
    return c.fetched && i >= c.fetched_from ? c.fetch.data() + (i - c.fetched_from) : mem + i;
  };
  while (c.pos < c.seg_dwords) {
    if (c.turn_left-- == 0) return Res::Yield;
    if (!c.fetched && c.seg_dwords - c.pos <= kFetchDwords) fetch_rest(c);
    const uint32_t header = *at(c.pos);
    const MethodHeader h = parse_method_header(header);
    auto where = [&] {
      return "GPFIFO entry " + std::to_string(c.entry) + ", push buffer " + hex(c.seg_va) +
             " dword " + std::to_string(c.pos);
    };
    try {
      switch (h.framing) {  // the push format's one framing rule (nv/push.hpp)
        case Framing::Nop:
          c.pos += h.dwords();
          continue;
        case Framing::Immediate:
          if (method(c, h.subchannel, h.method, h.count) == Res::Blocked) return blocked_at(c);
          c.pos += h.dwords();
          continue;
        case Framing::EndSegment:
          return Res::Done;
        case Framing::Invalid:
          bad("method header " + hex(header) + " with sec_op " + std::to_string(h.op));
        case Framing::Methods:
          break;
      }
      if (c.pos + h.dwords() > c.seg_dwords)
        bad("method header " + hex(header) + " has " + std::to_string(h.count) +
            " data dwords, the segment " + std::to_string(c.seg_dwords - c.pos - 1) + " more");
      if (h.op == uint32_t(SecOp::NonIncMethod) && h.method == COMPUTE_LOAD_INLINE_DATA &&
          c.sub_bound[h.subchannel] && c.sub_group[h.subchannel] == Group::COMPUTE) {
        inline_data(c, at(c.pos + 1), h.count);  // a QMD's worth in one translation
        c.pos += h.dwords();
        continue;
      }
      for (uint32_t i = c.resume; i < h.count; i++) {
        if (method(c, h.subchannel, h.method_of(i), *at(c.pos + 1 + i)) == Res::Blocked) {
          c.resume = i;
          return blocked_at(c);
        }
      }
      c.pos += h.dwords();
      c.resume = 0;
    } catch (ChannelError& e) {
      e.what = where() + ": " + e.what;
      throw;
    } catch (const Fault& f) {
      throw Fault(where() + ": " + f.what(), f.address());
    }
  }
  return Res::Done;
}

Engine::Res Engine::method(Channel& c, uint32_t sub, uint16_t m, uint32_t data) {
  if (m < kHostMethodsEnd) {
    if (m == HOST_SET_OBJECT) {
      const uint32_t cls = HOST_SET_OBJECT_NVCLASS_ALL.get(data);
      if (cls == classes_.compute_class)
        c.sub_group[sub] = Group::COMPUTE;
      else if (cls == classes_.copy_class)
        c.sub_group[sub] = Group::COPY;
      else
        bad("SET_OBJECT of class " + hex(cls) + " on subchannel " + std::to_string(sub) +
            ": this GPU's compute class is " + hex(classes_.compute_class) + ", its copy class " +
            hex(classes_.copy_class));
      c.sub_bound[sub] = true;
      return Res::Done;
    }
    return host_method(c, m, data);
  }
  if (!c.sub_bound[sub])
    bad("method " + hex(m) + " on subchannel " + std::to_string(sub) + ", which has no class");
  const Group g = c.sub_group[sub];
  const MethodInfo* info = find_method(g, m);
  if (!info)  // an H200 reports an unknown compute method as Xid 11
    bad("unknown " + std::string(to_string(g)) + " method " + hex(m) + " (data " + hex(data) + ")",
        g == Group::COMPUTE ? kRcGrMissingHw : kRcGrException);
  c.regs[sub][m / 4] = data;
  if (g == Group::COMPUTE)
    compute_method(c, sub, m, data);
  else
    copy_method(c, sub, m, data);
  return Res::Done;
}

Engine::Res Engine::host_method(Channel& c, uint16_t m, uint32_t data) {
  const MethodInfo* info = find_method(Group::HOST, m);
  if (!info) bad("unknown HOST method " + hex(m) + " (data " + hex(data) + ")");
  if (m != HOST_SEM_EXECUTE) {
    c.regs[0][m / 4] = data;
    if (m == HOST_NON_STALL_INTERRUPT) events_.nonstall_interrupt();
    return Res::Done;  // WFI: the emulated engines finish each method before the next
  }
  const uint64_t va = c.reg64(0, HOST_SEM_ADDR_HI, HOST_SEM_ADDR_LO);
  const bool wide = HOST_SEM_EXECUTE_PAYLOAD_SIZE_ALL.get(data);
  const uint64_t payload = wide ? c.reg64(0, HOST_SEM_PAYLOAD_HI, HOST_SEM_PAYLOAD_LO)
                                : c.reg(0, HOST_SEM_PAYLOAD_LO);
  if (va % (wide ? 8 : 4))
    throw Fault("semaphore address " + hex(va) + " is not " + (wide ? "8" : "4") +
                "-byte aligned", va);
  const uint32_t op = HOST_SEM_EXECUTE_OPERATION_ALL.get(data);
  if (op > HOST_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ)
    bad("SEM_EXECUTE operation " + std::to_string(op) + " (hcq's GPUs do 0 to 3)");
  const uint64_t cur = wide ? load<uint64_t>(mem_, va) : load<uint32_t>(mem_, va);
  switch (op) {
    case HOST_SEM_EXECUTE_OPERATION_ACQUIRE:  // equal
      return cur == payload ? Res::Done : Res::Blocked;
    case HOST_SEM_EXECUTE_OPERATION_RELEASE:
      if (wide)
        store<uint64_t>(mem_, va, payload);
      else
        store<uint32_t>(mem_, va, uint32_t(payload));
      if (HOST_SEM_EXECUTE_RELEASE_TIMESTAMP_ALL.get(data)) store<uint64_t>(mem_, va + 8, now_ns());
      return Res::Done;
    case HOST_SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ:
      return cur >= payload ? Res::Done : Res::Blocked;
    case HOST_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ:
      return (wide ? int64_t(cur - payload) : int64_t(int32_t(uint32_t(cur - payload)))) >= 0
                 ? Res::Done
                 : Res::Blocked;
  }
  return Res::Done;  // not reached: op was checked above
}

void Engine::compute_method(Channel& c, uint32_t sub, uint16_t m, uint32_t data) {
  // Hopper and later take a shared memory window only at a 4 GiB boundary: an H200 (RM
  // 580.159) stopped the channel with Xid 69 (class error, offset 0x2a4) for 0xfe000000.
  if (m == COMPUTE_SET_SHADER_SHARED_MEMORY_WINDOW_B && classes_.gen >= Gen::Hopper &&
      c.reg(sub, COMPUTE_SET_SHADER_SHARED_MEMORY_WINDOW_B) != 0)
    bad("SET_SHADER_SHARED_MEMORY_WINDOW_B " + hex(data) + ": the shared memory window must "
        "be 4 GiB aligned on Hopper and later", kRcGrClassError);
  if (m == COMPUTE_LAUNCH_DMA) {
    if (COMPUTE_LAUNCH_DMA_DST_MEMORY_LAYOUT_ALL.get(data) != COMPUTE_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH)
      bad("LAUNCH_DMA to block-linear memory (only pitch layout is emulated)");
    c.inline_dst = c.reg64(sub, COMPUTE_OFFSET_OUT_UPPER, COMPUTE_OFFSET_OUT);
    c.inline_left = uint64_t(c.reg(sub, COMPUTE_LINE_LENGTH_IN)) * c.reg(sub, COMPUTE_LINE_COUNT);
    return;
  }
  if (m == COMPUTE_LOAD_INLINE_DATA) {
    inline_data(c, &data, 1);
    return;
  }
  if (m == COMPUTE_SEND_SIGNALING_PCAS2_B) {
    const uint32_t action = COMPUTE_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_ALL.get(data);
    if (action != COMPUTE_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE)
      bad("SEND_SIGNALING_PCAS2_B action " + std::to_string(action) +
          " (the emulated GPU schedules with action 9, INVALIDATE_COPY_SCHEDULE)");
    launch(c, uint64_t(c.reg(sub, COMPUTE_SEND_PCAS_A)) << kQmdAddressShift);
  }
}

void Engine::inline_data(Channel& c, const uint32_t* data, uint32_t dwords) {
  if (c.inline_left == 0) bad("LOAD_INLINE_DATA with no inline transfer in progress");
  if (dwords > (c.inline_left + 3) / 4)
    bad("LOAD_INLINE_DATA of " + std::to_string(dwords) + " dwords overruns the inline "
        "transfer (" + std::to_string(c.inline_left) + " bytes left)");
  const uint64_t n = std::min<uint64_t>(uint64_t(dwords) * 4, c.inline_left);
  std::memcpy(mem_.translate(c.inline_dst, n), data, n);
  c.inline_dst += n;
  c.inline_left -= n;
}

void Engine::copy_method(Channel& c, uint32_t sub, uint16_t m, uint32_t data) {
  if (m != COPY_LAUNCH_DMA) return;
  const uint32_t type = COPY_LAUNCH_DMA_DATA_TRANSFER_TYPE_ALL.get(data);
  if (type != COPY_LAUNCH_DMA_DATA_TRANSFER_TYPE_NONE) {
    if (COPY_LAUNCH_DMA_SRC_MEMORY_LAYOUT_ALL.get(data) != COPY_LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH ||
        COPY_LAUNCH_DMA_DST_MEMORY_LAYOUT_ALL.get(data) != COPY_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH)
      bad("copy LAUNCH_DMA with a block-linear surface (only pitch layout is emulated)");
    if (COPY_LAUNCH_DMA_REMAP_ENABLE_ALL.get(data)) bad("copy LAUNCH_DMA with REMAP_ENABLE");
    const uint64_t src = c.reg64(sub, COPY_OFFSET_IN_UPPER, COPY_OFFSET_IN_LOWER);
    const uint64_t dst = c.reg64(sub, COPY_OFFSET_OUT_UPPER, COPY_OFFSET_OUT_LOWER);
    const uint64_t len = c.reg(sub, COPY_LINE_LENGTH_IN);
    const bool multi = COPY_LAUNCH_DMA_MULTI_LINE_ENABLE_ALL.get(data);
    const uint64_t lines = multi ? c.reg(sub, COPY_LINE_COUNT) : 1;
    const uint64_t pin = multi ? c.reg(sub, COPY_PITCH_IN) : len;
    const uint64_t pout = multi ? c.reg(sub, COPY_PITCH_OUT) : len;
    for (uint64_t l = 0; l < lines && len; l++) {
      const void* s = mem_.translate(src + l * pin, len);
      void* d = mem_.translate(dst + l * pout, len);
      std::memmove(d, s, len);
    }
  }
  const uint32_t sem = COPY_LAUNCH_DMA_SEMAPHORE_TYPE_ALL.get(data);
  if (sem != COPY_LAUNCH_DMA_SEMAPHORE_TYPE_NONE) {
    // A one-word release, or a four-word one: the payload, then the timestamp at +8.
    const uint64_t va = c.reg64(sub, COPY_SET_SEMAPHORE_A, COPY_SET_SEMAPHORE_B);
    const bool wide = COPY_LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE_ALL.get(data);
    const uint64_t payload = wide ? c.reg64(sub, COPY_SET_SEMAPHORE_PAYLOAD_UPPER,
                                            COPY_SET_SEMAPHORE_PAYLOAD)
                                  : c.reg(sub, COPY_SET_SEMAPHORE_PAYLOAD);
    if (sem > COPY_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE)
      bad("copy LAUNCH_DMA SEMAPHORE_TYPE " + std::to_string(sem));
    if (wide)
      store<uint64_t>(mem_, va, payload);
    else
      store<uint32_t>(mem_, va, uint32_t(payload));
    if (sem == COPY_LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE)
      store<uint64_t>(mem_, va + 8, now_ns());
  }
  if (COPY_LAUNCH_DMA_INTERRUPT_TYPE_ALL.get(data)) events_.nonstall_interrupt();
}


void Engine::launch(Channel& c, uint64_t qmd_va) {
  // A QMD may name a dependent QMD to schedule when it completes (V03 DEPENDENT_QMD0):
  // run the chain in order.
  constexpr int kMaxChain = 1 << 20;
  for (int n = 0; qmd_va; n++) {
    if (n == kMaxChain)
      bad("QMD at " + hex(qmd_va) + ": a dependent-QMD chain of more than " +
          std::to_string(kMaxChain) + " launches (a cycle?)");
    qmd_va = launch_one(c, qmd_va);
  }
}

uint64_t Engine::launch_one(Channel& c, uint64_t qmd_va) {
  const QmdVersion v = classes_.qmd;
  const auto* q = static_cast<const uint32_t*>(mem_.translate(qmd_va, qmd_bytes(v)));
  auto field = [&](const QmdField& f) { return f.get(q); };
  const std::string at = "QMD at " + hex(qmd_va) + ": ";
  const QmdLayout L = qmd_layout(v);
  const uint32_t major = field(*L.major_version);
  const Dim3 grid{field(*L.grid[0]), field(*L.grid[1]), field(*L.grid[2])};
  const Dim3 block{field(*L.block[0]), field(*L.block[1]), field(*L.block[2])};
  const uint64_t program = get_address(q, *L.program_lo, *L.program_hi, L.program_shift);
  const uint64_t cbuf = get_address(q, *L.cbuf_lo, *L.cbuf_hi, L.cbuf_shift);
  const uint32_t cbuf_bytes = field(*L.cbuf_size_shifted4) << kCbufSizeShift;
  const bool cbuf_valid = field(*L.cbuf_valid);
  if (major != uint32_t(v))
    bad(at + "QMD_MAJOR_VERSION is " + std::to_string(major) + "; this GPU's compute class " +
        hex(classes_.compute_class) + " takes V0" + std::to_string(int(v)) + " QMDs");
  if (grid.count() == 0 || block.count() == 0 || block.count() > kMaxCtaThreads)
    bad(at + "grid " + std::to_string(grid.x) + "x" + std::to_string(grid.y) + "x" +
        std::to_string(grid.z) + ", CTA " + std::to_string(block.x) + "x" +
        std::to_string(block.y) + "x" + std::to_string(block.z) +
        " (each at least 1, at most 1024 threads per CTA)");
  if (!cbuf_valid) bad(at + "constant buffer 0 is not valid (kernel parameters live there)");

  // The kernel: parse the cubin loaded at the start of the mapping the program address is in.
  const auto [base, size] = mem_.mapping_of(program);
  if (size == 0) throw Fault(at + "program address " + hex(program) + " is not mapped", program);
  uint8_t code[16] = {};
  std::memcpy(code, mem_.translate(program, std::min<uint64_t>(16, base + size - program)),
              std::min<uint64_t>(16, base + size - program));
  auto& cache = kernels_->by_program;
  auto it = cache.find(program);
  if (it != cache.end() && (it->second.map_base != base || it->second.map_size != size ||
                            std::memcmp(it->second.code, code, 16) != 0)) {
    cache.erase(it);
    it = cache.end();
  }
  if (it == cache.end()) {
    KernelCache::Entry k;
    try {
      auto image = static_cast<const std::byte*>(mem_.translate(base, size));
      Cubin cubin = parse_cubin({image, size});
      const CubinKernel* ck = cubin.kernel_at(program - base);
      if (!ck || ck->code_offset != program - base)
        bad(at + "no kernel starts at " + hex(program) + " in the cubin mapped at " + hex(base));
      k.name = ck->name;
      k.param_base = ck->param_base;
      k.param_bytes = ck->param_bytes;
      k.fn = hcq::emu::find_kernel(ck->name);
      k.map_base = base;
      k.map_size = size;
      std::memcpy(k.code, code, 16);
    } catch (const InvalidInput& e) {
      bad(at + "program address " + hex(program) + " is not in a cubin: " + e.what());
    }
    if (!k.fn) bad(at + "no CPU implementation registered for kernel '" + k.name + "'");
    it = cache.emplace(program, std::move(k)).first;
  }
  const KernelCache::Entry& k = it->second;
  if (uint64_t(k.param_base) + k.param_bytes > cbuf_bytes)
    bad(at + "constant buffer 0 is " + std::to_string(cbuf_bytes) + " bytes; kernel '" + k.name +
        "' reads parameters up to " + std::to_string(k.param_base + k.param_bytes));
  hcq::emu::Dispatch d;
  d.grid = grid;
  d.block = block;
  d.kernargs = static_cast<const std::byte*>(mem_.translate(cbuf + k.param_base, k.param_bytes));
  d.kernarg_size = k.param_bytes;
  d.memory = &mem_;
  d.abandon = preemption_.flag();
  auto running = preemption_.run(c.d.id);
  (*k.fn)(d);
  if (L.dependent_enable && field(*L.dependent_enable)) {
    const uint32_t action = field(*L.dependent_action);
    if (action != QMD_V03_DEPENDENT_QMD0_ACTION_QMD_SCHEDULE)
      bad(at + "DEPENDENT_QMD0_ACTION " + std::to_string(action) +
          " (the emulated GPU schedules dependents: action 1)");
    return uint64_t(field(*L.dependent_pointer)) << kQmdAddressShift;
  }
  return 0;
}

}  // namespace hcq::nv::emu
