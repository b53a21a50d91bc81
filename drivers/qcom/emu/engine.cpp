// The emulated Adreno command processor. One thread runs every context's submissions in order;
// a context blocked in CP_WAIT_REG_MEM keeps its place and the others go on.
#include "qcom/emu/engine.hpp"

#include <chrono>
#include <cstring>
#include <unordered_map>

#include "core/error.hpp"
#include "emu/kernels.hpp"
#include "qcom/program.hpp"

namespace hcq::qcom::emu {

using hcq::emu::Fault;

namespace {

struct ContextFault {
  std::string what;
};
[[noreturn]] void bad(std::string what) { throw ContextFault{std::move(what)}; }

constexpr int kMaxIbDepth = 2;              // the ring's IBs may call one more level
constexpr uint32_t kConstDwords = 0x4000;   // the constant file hcq's kernels can fill
constexpr uint32_t kMaxUavs = SP_CS_CONFIG_NIBO.mask(Gen::A6xx);  // 127 (regs.def)
constexpr auto kIdleSleep = std::chrono::microseconds(200);
// After work, poll for the next submission this long before sleeping: a condition-variable
// wake costs microseconds, a back-to-back submission stream would pay it each time.
constexpr auto kSpinAfterActivity = std::chrono::microseconds(200);

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

struct Engine::KernelCache {
  struct Entry {
    std::string name;
    uint32_t args_offset = 0, args_bytes = 0, uav_count = 0;
    uint64_t instr_bytes = 0;
    const hcq::emu::KernelFn* fn = nullptr;
    uint64_t map_base = 0, map_size = 0;
  };
  std::unordered_map<uint64_t, Entry> by_program;
};

struct Engine::Context {
  struct Submission {
    uint32_t timestamp;
    std::vector<Ib> ibs;
  };
  struct Frame {
    uint64_t va;
    uint32_t dwords, pos;
  };
  uint32_t id = 0;
  bool dead = false;
  std::deque<Submission> pending;
  size_t ib_index = 0;           // next IB of the front submission
  int turn_left = 0;             // packets this turn may still run (Interleaver::turn)
  std::vector<Frame> stack;      // the IB being run (and the one it called)
  bool published = false;       // its wait position is in Engine::waiting_
  std::vector<uint32_t> regs = std::vector<uint32_t>(0x10000, 0);
  std::vector<uint32_t> consts = std::vector<uint32_t>(kConstDwords, 0);
  // UAV descriptors as CP_LOAD_STATE6 (ST6_UAV) loaded them, and the address it read them from.
  std::vector<uint32_t> uav_state;
  uint64_t uav_state_va = 0;
  std::vector<hcq::emu::BufferView> uav_views;  // the launch's, decoded from uav_state
};

Engine::Engine(Gen gen, Memory& memory, GpuEvents& events)
    : gen_(gen), mem_(memory), events_(events), kernels_(std::make_unique<KernelCache>()) {
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  preemption_.abandon_all();  // a kernel still running must let the thread go
  cv_.notify_all();
  thread_.join();
}

uint64_t Engine::always_on() const {
  return uint64_t((unsigned __int128)now_ns() * 19'200'000 / 1'000'000'000u);
}

// Submissions and removals go through an inbox: the engine thread owns the contexts and runs
// them without mu_, so a submit or a wait on another context never waits for a kernel the
// GPU is running (a spinning one would hold them all up).
void Engine::submit(uint32_t context, uint32_t timestamp, std::vector<Ib> ibs) {
  {
    std::lock_guard lk(mu_);
    inbox_.push_back({context, timestamp, std::move(ibs)});
  }
  submissions_.fetch_add(1, std::memory_order_release);
  cv_.notify_all();
}

void Engine::remove_context(uint32_t context) {
  preemption_.abandon(context);  // a kernel of the context being destroyed stops
  std::unique_lock lk(mu_);
  removals_.push_back(context);
  const uint64_t ticket = ++removal_requests_;
  submissions_.fetch_add(1, std::memory_order_release);
  cv_.notify_all();
  // Back once the engine no longer runs it: the caller may free what its work used.
  removed_cv_.wait(lk, [&] { return removals_done_ >= ticket || stop_; });
}

// Under mu_: takes the inbox into the engine's own contexts; returns whether anything came.
bool Engine::take_inbox() {
  bool any = !inbox_.empty() || !removals_.empty();
  for (auto& in : inbox_) {
    auto& c = contexts_[in.context];
    if (!c) {
      c = std::make_unique<Context>();
      c->id = in.context;
    }
    c->pending.push_back({in.timestamp, std::move(in.ibs)});
  }
  inbox_.clear();
  for (uint32_t id : removals_) {
    contexts_.erase(id);
    std::lock_guard plk(positions_mu_);
    waiting_.erase(id);
  }
  removals_.clear();
  if (removals_done_ != removal_requests_) {
    removals_done_ = removal_requests_;
    removed_cv_.notify_all();
  }
  return any;
}

void Engine::run() {
  auto last_activity = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (stop_) break;
      if (take_inbox()) last_activity = std::chrono::steady_clock::now();
    }
    bool progress = false, waiting = false;
    order_.clear();
    for (auto& entry : contexts_) order_.push_back(entry.second.get());
    const uint64_t mark = interleave_.mark();
    interleave_.shuffle(order_);  // HCQ_EMU_INTERLEAVE_SEED: a random order each pass
    for (Context* c : order_) {
      if (c->dead || c->pending.empty()) continue;
      waiting = true;
      progress |= step(*c);
    }
    if (!progress) interleave_.rewind(mark);  // an idle pass draws nothing
    if (progress) {
      last_activity = std::chrono::steady_clock::now();
      continue;
    }
    // Nothing moved. Within kSpinAfterActivity of the last progress, poll (a CP polls the
    // memory a wait names; sleeping 20 us at once made a wait on the host cost 50-80 us);
    // a wait that goes on longer looks every 20 us; an idle engine sleeps until a submission.
    const bool recent = std::chrono::steady_clock::now() - last_activity < kSpinAfterActivity;
    if (waiting && !recent) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    } else if (recent) {
      const uint64_t seen = submissions_.load(std::memory_order_acquire);
      for (int i = 0; i < 64 && submissions_.load(std::memory_order_acquire) == seen &&
                      !stop_.load(std::memory_order_relaxed);
           i++)
        std::this_thread::yield();
    } else {
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, kIdleSleep, [&] { return stop_ || !inbox_.empty() || !removals_.empty(); });
    }
  }
  std::lock_guard lk(mu_);
  removed_cv_.notify_all();  // stop_ releases any remover
}

std::string Engine::ib_positions() {
  std::lock_guard lk(positions_mu_);
  std::string out;
  for (const auto& [context, w] : waiting_)
    out.append("IB ").append(hex(w.va)).append(" ").append(std::to_string(w.dwords))
        .append(" dwords, at dword ").append(std::to_string(w.pos)).append("\n");
  return out;
}

void Engine::publish_wait(Context& c) {
  if (c.stack.empty()) return;
  const Context::Frame& f = c.stack.back();
  std::lock_guard lk(positions_mu_);
  waiting_[c.id] = {f.va, f.dwords, f.pos};
  c.published = true;
}

void Engine::unpublish_wait(Context& c) {
  std::lock_guard lk(positions_mu_);
  waiting_.erase(c.id);
  c.published = false;
}

bool Engine::step(Context& c) {
  bool progress = false;
  c.turn_left = interleave_.turn(INT32_MAX);
  try {
    while (!c.pending.empty()) {
      auto& sub = c.pending.front();
      if (c.stack.empty()) {
        if (c.ib_index == sub.ibs.size()) {
          const uint32_t ts = sub.timestamp;
          c.pending.pop_front();
          c.ib_index = 0;
          events_.retired(c.id, ts);
          progress = true;
          continue;
        }
        const Ib& ib = sub.ibs[c.ib_index++];
        c.stack.push_back({ib.va, ib.dwords, 0});
      }
      const Res r = exec_ib(c);
      if (r == Res::Blocked) {
        publish_wait(c);
        return progress;
      }
      if (c.published) unpublish_wait(c);
      if (r == Res::Yield) return true;  // it ran a packet of this turn at least
      progress = true;
    }
  } catch (const ContextFault& f) {
    c.dead = true;
    events_.fault(c.id, "context " + std::to_string(c.id) + ": " + f.what);
  } catch (const Fault& f) {
    c.dead = true;
    events_.fault(c.id, "context " + std::to_string(c.id) + ": page fault at " +
                            hex(f.address()) + ": " + f.what());
  }
  return true;
}

Engine::Res Engine::exec_ib(Context& c) {
  while (!c.stack.empty()) {
    auto& f = c.stack.back();
    const auto* w = static_cast<const uint32_t*>(mem_.translate(f.va, uint64_t(f.dwords) * 4));
    if (f.pos >= f.dwords) {
      c.stack.pop_back();
      continue;
    }
    if (c.turn_left-- == 0) return Res::Yield;
    const uint32_t h = w[f.pos];
    // Where a fault names the packet: built only then (a string per packet made an IB of
    // 2^20 fillers take seconds under the sanitizers). f may move as the stack grows.
    const uint64_t at_va = f.va;
    const uint32_t at_pos = f.pos;
    auto where = [&] { return "IB " + hex(at_va) + " dword " + std::to_string(at_pos) + ": "; };
    uint32_t len = 1;
    try {
      const CpFrame frame = frame_cp(h);
      if (frame.kind != CpKind::Type2Filler && frame.kind != CpKind::Pkt4 &&
          frame.kind != CpKind::Pkt7)
        bad("header " + hex(h) + ": " + frame.problem);
      if (f.pos + frame.dwords > f.dwords)
        bad("packet of " + std::to_string(frame.dwords) + " dwords (header " + hex(h) +
            ") runs past the IB");
      len = frame.dwords;
      if (frame.kind == CpKind::Pkt4) {
        const uint32_t r = pkt4_reg(h);
        for (uint32_t i = 1; i < len; i++) c.regs[(r + i - 1) & 0xffff] = w[f.pos + i];
      } else if (frame.kind == CpKind::Pkt7) {
        uint32_t skip = 0;
        const size_t depth = c.stack.size();
        if (packet(c, w + f.pos, len - 1, skip) == Res::Blocked) return Res::Blocked;
        len += skip;
        if (c.stack.size() > depth) {  // it called an IB: continue there, return after
          c.stack[depth - 1].pos += len;
          continue;
        }
      }
    } catch (ContextFault& e) {
      e.what = where() + e.what;
      throw;
    } catch (const Fault& e) {
      throw Fault(where() + e.what(), e.address());
    }
    c.stack.back().pos += len;
  }
  return Res::Done;
}

Engine::Res Engine::packet(Context& c, const uint32_t* p, uint32_t n, uint32_t& skip) {
  const uint32_t op = pkt7_opcode(p[0]);
  const PacketInfo* info = find_packet(uint8_t(op), gen_);
  if (!info) bad("unknown CP opcode " + hex(op));
  if (info->dwords && info->dwords != n + 1)
    bad(std::string(info->name) + " of " + std::to_string(n + 1) + " dwords (it has " +
        std::to_string(info->dwords) + ")");
  auto store32 = [&](uint64_t va, uint32_t v) {
    __atomic_store_n(static_cast<uint32_t*>(mem_.translate(va, 4)), v, __ATOMIC_RELEASE);
  };
  switch (op) {
    case CP_NOP:
    case CP_WAIT_FOR_IDLE:
    case CP_WAIT_FOR_ME:
    case CP_WAIT_MEM_WRITES:
    case CP_SET_MARKER:
    case CP_THREAD_CONTROL:
      return Res::Done;  // the emulated CP finishes each packet before the next
    case CP_WAIT_REG_MEM: {
      if (CP_WAIT_REG_MEM_POLL.get(p) != POLL_MEMORY) bad("CP_WAIT_REG_MEM on a register");
      const uint64_t poll = get64(p, CP_WAIT_REG_MEM_POLL_ADDR_LO, CP_WAIT_REG_MEM_POLL_ADDR_HI);
      const uint32_t v = __atomic_load_n(static_cast<const uint32_t*>(mem_.translate(poll, 4)),
                                         __ATOMIC_ACQUIRE) & CP_WAIT_REG_MEM_MASK.get(p);
      const uint32_t ref = CP_WAIT_REG_MEM_REF.get(p);
      bool ok;
      switch (CP_WAIT_REG_MEM_FUNCTION.get(p)) {
        case WRITE_ALWAYS: ok = true; break;
        case WRITE_LT: ok = v < ref; break;
        case WRITE_LE: ok = v <= ref; break;
        case WRITE_EQ: ok = v == ref; break;
        case WRITE_NE: ok = v != ref; break;
        case WRITE_GE: ok = v >= ref; break;
        case WRITE_GT: ok = v > ref; break;
        default: bad("CP_WAIT_REG_MEM function " + std::to_string(CP_WAIT_REG_MEM_FUNCTION.get(p)));
      }
      return ok ? Res::Done : Res::Blocked;
    }
    case CP_COND_EXEC: {
      // Runs the next DWORDS dwords if the dword at BOOL_ADDR is not 0 and the dword at
      // TIMESTAMP_ADDR is less than ACTIVE_TIMESTAMP (signed); skips them otherwise.
      const uint64_t bool_va = get64(p, CP_COND_EXEC_BOOL_ADDR_LO, CP_COND_EXEC_BOOL_ADDR_HI);
      const uint64_t ts_va =
          get64(p, CP_COND_EXEC_TIMESTAMP_ADDR_LO, CP_COND_EXEC_TIMESTAMP_ADDR_HI);
      const uint32_t b = *static_cast<const uint32_t*>(mem_.translate(bool_va, 4));
      const int32_t t = int32_t(*static_cast<const uint32_t*>(mem_.translate(ts_va, 4)));
      if (!(b != 0 && t < int32_t(CP_COND_EXEC_ACTIVE_TIMESTAMP.get(p))))
        skip = CP_COND_EXEC_DWORDS.get(p);
      return Res::Done;
    }
    case CP_MEM_WRITE: {
      const uint32_t data = CP_MEM_WRITE_DATA.dword;  // the dwords to write, to the end
      if (n < data) bad("CP_MEM_WRITE without data");
      const uint64_t va = get64(p, CP_MEM_WRITE_ADDR_LO, CP_MEM_WRITE_ADDR_HI);
      if (n + 1 == data + 2 && va % 8 == 0)  // a 64-bit value lands at once
        __atomic_store_n(static_cast<uint64_t*>(mem_.translate(va, 8)),
                         uint64_t(p[data + 1]) << 32 | p[data], __ATOMIC_RELEASE);
      else
        for (uint32_t i = data; i <= n; i++) store32(va + (i - data) * 4, p[i]);
      return Res::Done;
    }
    case CP_EVENT_WRITE: {  // a6xx; a7xx's CP_EVENT_WRITE7 shares the opcode
      if (gen_ == Gen::A6xx) {
        if (CP_EVENT_WRITE_TIMESTAMP.get(p)) {
          if (n < CP_EVENT_WRITE_VALUE.dword)
            bad("CP_EVENT_WRITE with a timestamp but no address and value");
          store32(get64(p, CP_EVENT_WRITE_ADDR_LO, CP_EVENT_WRITE_ADDR_HI),
                  CP_EVENT_WRITE_VALUE.get(p));
        }
      } else if (CP_EVENT_WRITE7_WRITE_ENABLED.get(p)) {
        if (n < CP_EVENT_WRITE7_PAYLOAD_0.dword)
          bad("CP_EVENT_WRITE7 with a write but no address and value");
        store32(get64(p, CP_EVENT_WRITE7_ADDR_LO, CP_EVENT_WRITE7_ADDR_HI),
                CP_EVENT_WRITE7_PAYLOAD_0.get(p));
      }
      return Res::Done;
    }
    case CP_REG_TO_MEM: {
      const uint32_t r = CP_REG_TO_MEM_REG.get(p), cnt = std::max(1u, CP_REG_TO_MEM_CNT.get(p));
      const uint64_t dst = get64(p, CP_REG_TO_MEM_DEST_LO, CP_REG_TO_MEM_DEST_HI);
      if (r == reg_address(RegId::CP_ALWAYS_ON_COUNTER_LO, gen_)) {
        const uint64_t t = always_on();
        if (CP_REG_TO_MEM_64B.get(p))
          __atomic_store_n(static_cast<uint64_t*>(mem_.translate(dst, 8)), t, __ATOMIC_RELEASE);
        else
          store32(dst, uint32_t(t));
        return Res::Done;
      }
      for (uint32_t i = 0; i < cnt; i++) store32(dst + i * 4, c.regs[(r + i) & 0xffff]);
      return Res::Done;
    }
    case CP_LOAD_STATE6:
    case CP_LOAD_STATE6_FRAG:
    case CP_LOAD_STATE6_GEOM: {
      // CP_LOAD_STATE6_GEOM and _FRAG have CP_LOAD_STATE6's layout (cp.def).
      const uint32_t type = CP_LOAD_STATE6_STATE_TYPE.get(p), src = CP_LOAD_STATE6_STATE_SRC.get(p);
      const uint32_t block = CP_LOAD_STATE6_STATE_BLOCK.get(p);
      const uint32_t units = CP_LOAD_STATE6_NUM_UNIT.get(p), dst = CP_LOAD_STATE6_DST_OFF.get(p);
      const uint64_t ext = get64(p, CP_LOAD_STATE6_EXT_SRC_ADDR_LO, CP_LOAD_STATE6_EXT_SRC_ADDR_HI);
      if (type == ST6_SHADER) return Res::Done;  // instructions: the kernel is found by address
      const bool uav = type == ST6_UAV;
      if ((type != ST6_CONSTANTS && !uav) || block != SB6_CS_SHADER)
        bad("CP_LOAD_STATE6 of state type " + std::to_string(type) + " into block " + hex(block) +
            " (the emulated GPU loads compute constants and UAV descriptors)");
      // A unit: a vec4 of constants, or a 16-dword UAV descriptor.
      const uint32_t unit_dwords = uav ? kTEX_MEMOBJ_DWORDS : 4;
      if (uav && dst + units > kMaxUavs)
        bad("CP_LOAD_STATE6 of UAV descriptors " + std::to_string(dst) + ".." +
            std::to_string(dst + units) + " past the " + std::to_string(kMaxUavs) + " UAV slots");
      if (!uav && uint64_t(dst + units) * 4 > kConstDwords) bad("CP_LOAD_STATE6 past the constant file");
      const void* from;
      if (src == SS6_INDIRECT) {
        if (n < CP_LOAD_STATE6_EXT_SRC_ADDR_HI.dword) bad("CP_LOAD_STATE6 without an address");
        from = mem_.translate(ext, uint64_t(units) * unit_dwords * 4);
      } else if (src == SS6_DIRECT) {
        if (n + 1 < CP_LOAD_STATE6_INLINE.dword + units * unit_dwords)
          bad("CP_LOAD_STATE6 with less inline data than its units");
        from = p + CP_LOAD_STATE6_INLINE.dword;  // after the two (ignored) address dwords
      } else {
        bad("CP_LOAD_STATE6 state source " + std::to_string(src));
      }
      if (uav) {
        // The descriptors are read now (a preload); SP_CS_IBO must point where they came from.
        if (c.uav_state.size() < (dst + units) * unit_dwords) c.uav_state.resize((dst + units) * unit_dwords);
        std::memcpy(c.uav_state.data() + dst * unit_dwords, from, uint64_t(units) * unit_dwords * 4);
        c.uav_state_va = src == SS6_INDIRECT ? ext - uint64_t(dst) * unit_dwords * 4 : 0;
        return Res::Done;
      }
      std::memcpy(c.consts.data() + dst * 4, from, uint64_t(units) * 16);
      return Res::Done;
    }
    case CP_INDIRECT_BUFFER: {
      if (c.stack.size() >= kMaxIbDepth) bad("CP_INDIRECT_BUFFER nested too deep");
      const uint32_t dwords = CP_INDIRECT_BUFFER_IB_SIZE.get(p);
      const uint64_t va = get64(p, CP_INDIRECT_BUFFER_IB_BASE_LO, CP_INDIRECT_BUFFER_IB_BASE_HI);
      mem_.translate(va, uint64_t(dwords) * 4);
      c.stack.push_back({va, dwords, 0});
      return Res::Done;
    }
    case CP_MEM_TO_MEM: {
      // *DST = (-)*SRC_A (-)*SRC_B (-)*SRC_C + *SRC_D..., 32- or 64-bit (DOUBLE) values: the
      // sources' addresses follow DST (adreno_pm4.xml CP_MEM_TO_MEM).
      const uint32_t srcs = CP_MEM_TO_MEM_SRC.dword;  // LO/HI pairs from here to the end
      if (n + 1 < srcs + 2 || (n + 1 - srcs) % 2 != 0)
        bad("CP_MEM_TO_MEM of " + std::to_string(n + 1) + " dwords (a destination and whole "
            "source addresses)");
      const bool wide = CP_MEM_TO_MEM_DOUBLE.get(p);
      const uint64_t dst = get64(p, CP_MEM_TO_MEM_DST_LO, CP_MEM_TO_MEM_DST_HI);
      const uint32_t size = wide ? 8 : 4;
      const Field* negate[] = {&CP_MEM_TO_MEM_NEG_A, &CP_MEM_TO_MEM_NEG_B, &CP_MEM_TO_MEM_NEG_C};
      uint64_t sum = 0;
      for (uint32_t i = 0; srcs + 2 * i + 1 <= n; i++) {
        const uint64_t src_va = uint64_t(p[srcs + 2 * i + 1]) << 32 | p[srcs + 2 * i];
        const void* from = mem_.translate(src_va, size);
        uint64_t v = wide ? __atomic_load_n(static_cast<const uint64_t*>(from), __ATOMIC_ACQUIRE)
                          : __atomic_load_n(static_cast<const uint32_t*>(from), __ATOMIC_ACQUIRE);
        if (i < 3 && negate[i]->get(p)) v = 0 - v;
        sum += v;
      }
      if (wide)
        __atomic_store_n(static_cast<uint64_t*>(mem_.translate(dst, 8)), sum, __ATOMIC_RELEASE);
      else
        store32(dst, uint32_t(sum));
      return Res::Done;
    }
    case CP_EXEC_CS:
      launch(c, p);
      return Res::Done;
  }
  bad(std::string(info->name) + " (the emulated GPU does not run it)");
}

void Engine::launch(Context& c, const uint32_t* p) {
  auto reg = [&](RegId r) { return c.regs[reg_address(r, gen_)]; };
  const uint32_t nd0 = reg(RegId::HLSQ_CS_NDRANGE_0);
  Dim3 block{HLSQ_CS_NDRANGE_0_LOCALSIZEX.get(gen_, nd0) + 1,
             HLSQ_CS_NDRANGE_0_LOCALSIZEY.get(gen_, nd0) + 1,
             HLSQ_CS_NDRANGE_0_LOCALSIZEZ.get(gen_, nd0) + 1};
  Dim3 grid{CP_EXEC_CS_NGROUPS_X.get(p), CP_EXEC_CS_NGROUPS_Y.get(p), CP_EXEC_CS_NGROUPS_Z.get(p)};
  if (grid.count() == 0) return;
  if (gen_ == Gen::A7xx) {
    // a7xx sizes the last workgroup in each dimension from HLSQ_CS_LAST_LOCAL_SIZE (turnip
    // tu_dispatch); the emulated GPU runs whole workgroups only, so it must match the rest.
    const uint32_t last = reg(RegId::HLSQ_CS_LAST_LOCAL_SIZE);
    const Dim3 last_block{HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEX.get(gen_, last) + 1,
                          HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEY.get(gen_, last) + 1,
                          HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEZ.get(gen_, last) + 1};
    if (last_block.x != block.x || last_block.y != block.y || last_block.z != block.z)
      bad("CP_EXEC_CS: HLSQ_CS_LAST_LOCAL_SIZE gives the last workgroup " +
          std::to_string(last_block.x) + "x" + std::to_string(last_block.y) + "x" +
          std::to_string(last_block.z) + ", the others are " + std::to_string(block.x) + "x" +
          std::to_string(block.y) + "x" + std::to_string(block.z) +
          " (the emulated GPU runs whole workgroups only)");
  }
  if (!SP_CS_CONFIG_ENABLED.get(gen_, reg(RegId::SP_CS_CONFIG)))
    bad("CP_EXEC_CS with the compute stage disabled (SP_CS_CONFIG.ENABLED is 0)");
  const uint64_t program =
      uint64_t(reg(RegId::SP_CS_OBJ_START_HI)) << 32 | reg(RegId::SP_CS_OBJ_START_LO);
  const auto [base, size] = mem_.mapping_of(program);
  if (size == 0) throw Fault("CP_EXEC_CS: shader address " + hex(program) + " is not mapped", program);
  auto& cache = kernels_->by_program;
  auto it = cache.find(program);
  if (it != cache.end() && (it->second.map_base != base || it->second.map_size != size)) {
    cache.erase(it);
    it = cache.end();
  }
  if (it == cache.end()) {
    KernelCache::Entry e;
    try {
      auto image = static_cast<const std::byte*>(mem_.translate(base, size));
      uint64_t file = 0;
      if (size < kLoadedHeaderBytes || std::memcmp(image, kLoadedMagic, 8) != 0)
        bad("CP_EXEC_CS: the mapping at " + hex(base) + " holding shader address " +
            hex(program) + " is not a loaded ir3 container");
      std::memcpy(&file, image + 8, 8);
      if (file > size - kLoadedHeaderBytes)
        bad("CP_EXEC_CS: the loaded ir3 container at " + hex(base) + " claims " +
            std::to_string(file) + " bytes");
      Ir3Module m = parse_ir3({image + kLoadedHeaderBytes, file});
      uint64_t total = 0;
      auto places = place_ir3(m, file, total);
      const Ir3Kernel* found = nullptr;
      for (size_t i = 0; i < m.kernels.size(); i++)
        if (base + places[i].code == program) found = &m.kernels[i];
      if (!found) bad("CP_EXEC_CS: no kernel of the ir3 container at " + hex(base) + " starts at " + hex(program));
      e.name = found->name;
      e.args_offset = found->args_offset;
      e.args_bytes = found->args_bytes;
      e.uav_count = found->uav_count;
      e.instr_bytes = uint64_t(found->instructions.size()) * 4;
    } catch (const InvalidInput& err) {
      bad("CP_EXEC_CS: shader address " + hex(program) + " is not in an ir3 container: " + err.what());
    }
    e.fn = hcq::emu::find_kernel(e.name);
    if (!e.fn) bad("CP_EXEC_CS: no CPU implementation registered for kernel '" + e.name + "'");
    e.map_base = base;
    e.map_size = size;
    it = cache.emplace(program, std::move(e)).first;
  }
  const auto& k = it->second;
  // SP_CS_INSTRLEN counts 128-byte units (16 ir3 instructions): Mesa ir3_shader.h instrlen,
  // turnip tu6_emit_xs; tinygrad's ops_qcom.py agrees since 2026-07.
  const uint64_t instrlen = SP_CS_INSTRLEN_INSTRLEN.get(gen_, reg(RegId::SP_CS_INSTRLEN));
  const uint64_t needed = (k.instr_bytes + 127) / 128;
  if (instrlen != needed)
    bad("CP_EXEC_CS: SP_CS_INSTRLEN is " + std::to_string(instrlen) + " (128-byte units); kernel '" +
        k.name + "' has " + std::to_string(k.instr_bytes) + " bytes of instructions, " +
        std::to_string(needed) + " units");
  bind_uavs(c, k.name, k.uav_count);
  hcq::emu::Dispatch d;
  d.grid = grid;
  d.block = block;
  d.kernargs = reinterpret_cast<const std::byte*>(c.consts.data()) + k.args_offset;
  d.kernarg_size = k.args_bytes;
  d.memory = &mem_;
  d.uavs = c.uav_views;
  d.abandon = preemption_.flag();
  auto running = preemption_.run(c.id);
  (*k.fn)(d);
}

// The UAVs of a launch: SP_CS_CONFIG.NIBO descriptors, loaded by CP_LOAD_STATE6 (ST6_UAV) from
// where SP_CS_IBO points, SP_CS_IBO_COUNT agreeing; each a linear buffer of 8-, 16- or 32-bit
// unsigned elements (descriptors.def), 64-byte aligned and mapped.
void Engine::bind_uavs(Context& c, const std::string& kernel, uint32_t uses) {
  auto reg = [&](RegId r) { return c.regs[reg_address(r, gen_)]; };
  const uint32_t n = SP_CS_CONFIG_NIBO.get(gen_, reg(RegId::SP_CS_CONFIG));
  c.uav_views.clear();
  if (n < uses)
    bad("CP_EXEC_CS: kernel '" + kernel + "' uses " + std::to_string(uses) +
        " UAVs, SP_CS_CONFIG.NIBO gives it " + std::to_string(n));
  if (n == 0) return;
  const std::string at = "CP_EXEC_CS: ";
  if (reg(RegId::SP_CS_IBO_COUNT) != n)
    bad(at + "SP_CS_CONFIG.NIBO is " + std::to_string(n) + ", SP_CS_IBO_COUNT is " +
        std::to_string(reg(RegId::SP_CS_IBO_COUNT)));
  if (c.uav_state.size() < n * kTEX_MEMOBJ_DWORDS)
    bad(at + "SP_CS_CONFIG.NIBO is " + std::to_string(n) + ", but CP_LOAD_STATE6 loaded " +
        std::to_string(c.uav_state.size() / kTEX_MEMOBJ_DWORDS) + " UAV descriptors");
  const uint64_t ibo = uint64_t(reg(RegId::SP_CS_IBO_HI)) << 32 | reg(RegId::SP_CS_IBO_LO);
  if (ibo != c.uav_state_va)
    bad(at + "SP_CS_IBO is " + hex(ibo) + ", but the UAV descriptors were loaded from " +
        hex(c.uav_state_va));
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t* d = c.uav_state.data() + i * kTEX_MEMOBJ_DWORDS;
    const std::string which = at + "UAV " + std::to_string(i) + " descriptor at " +
                              hex(ibo + uint64_t(i) * kTEX_MEMOBJ_DWORDS * 4) + ": ";
    if (TEX_MEMOBJ_TYPE.get(d) != A6XX_TEX_BUFFER)
      bad(which + "TYPE " + std::to_string(TEX_MEMOBJ_TYPE.get(d)) +
          " is not A6XX_TEX_BUFFER (the emulated GPU runs buffer UAVs)");
    if (TEX_MEMOBJ_TILE_MODE.get(d) != TILE6_LINEAR)
      bad(which + "TILE_MODE " + std::to_string(TEX_MEMOBJ_TILE_MODE.get(d)) + " is not TILE6_LINEAR");
    const uint32_t fmt = TEX_MEMOBJ_FMT.get(d);
    const uint32_t elem = fmt == FMT6_32_UINT ? 4 : fmt == FMT6_16_UINT ? 2 : fmt == FMT6_8_UINT ? 1 : 0;
    if (!elem)
      bad(which + "FMT " + hex(fmt) + " is not FMT6_8_UINT, FMT6_16_UINT or FMT6_32_UINT");
    // BASE_LO holds address bits 31:5 in place; its whole dword is read, as the launch's
    // CP_MEM_TO_MEM wrote the address there, so that bits below it show a misaligned buffer
    // (freedreno aligns a buffer's base to 64 bytes: fdl6_buffer_view_init).
    const uint64_t base = uint64_t(TEX_MEMOBJ_BASE_HI.get(d)) << 32 | d[TEX_MEMOBJ_BASE_LO.dword];
    if (base % 64)
      bad(which + "base address " + hex(base) + " is not 64-byte aligned");
    hcq::emu::BufferView v;
    v.va = base + uint64_t(TEX_MEMOBJ_STARTOFFSETTEXELS.get(d)) * elem;
    // Elements: HEIGHT holds the count's bits above WIDTH's.
    v.bytes = (uint64_t(TEX_MEMOBJ_HEIGHT.get(d)) << TEX_MEMOBJ_WIDTH.width |
               TEX_MEMOBJ_WIDTH.get(d)) * elem;
    if (mem_.mapping_of(v.va).second == 0)
      throw Fault(which + "buffer address " + hex(v.va) + " is not mapped", v.va);
    c.uav_views.push_back(v);
  }
}

}  // namespace hcq::qcom::emu
