// Recordings longer than one indirect buffer: Queue splits them between commands, at the
// queue's limit (HwQueue::max_indirect_dwords, or Device::Options::max_indirect_dwords when
// lower) and granule, and refuses a command longer than one. A stub driver records what
// reaches the hardware queue, so every piece is checked exactly at each limit and one off it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>

#include "core/hcq.hpp"
#include "common/error_of.hpp"

namespace hcq {
namespace {

// What reached a hardware queue: one entry per indirect buffer.
struct IbRun {
  int queue;
  uint64_t offset;  // from the recording's bound address
  size_t dwords;
  bool operator==(const IbRun&) const = default;
};

class RecordingQueue final : public HwQueue {
 public:
  RecordingQueue(int id, size_t max, size_t granule, std::vector<std::pair<int, uint64_t>>& log)
      : id_(id), max_(max), granule_(granule), log_(log) {}
  void submit(const uint32_t*, size_t) override {}
  void submit_indirect(uint64_t va, size_t ndwords) override {
    EXPECT_LE(ndwords, max_);
    EXPECT_EQ(va % (granule_ * 4), 0u);
    log_.push_back({id_, va});
    sizes.push_back(ndwords);
  }
  size_t max_indirect_dwords() const override { return max_; }
  size_t indirect_granule_dwords() const override { return granule_; }
  std::vector<size_t> sizes;

 private:
  int id_;
  size_t max_, granule_;
  std::vector<std::pair<int, uint64_t>>& log_;
};

// Commands of known sizes: a copy of `size` bytes is `size` dwords (tag, then the destination
// address as a patch site at its end), a signal 4 dwords (tag, address, value).
class SizedEncoder final : public Encoder {
 public:
  void wait(CommandStream& cs, uint64_t, uint64_t, std::vector<PatchSite>&) override {
    *cs.grow(1) = 0x77;
  }
  void signal(CommandStream& cs, uint64_t va, uint64_t value, bool,
              std::vector<PatchSite>& sites) override {
    uint32_t* w = cs.grow(4);
    const uint32_t at = uint32_t(cs.size() - 4);
    w[0] = 0x5;
    w[1] = uint32_t(va);
    w[2] = uint32_t(va >> 32);
    w[3] = uint32_t(value);
    sites.push_back({at + 1, PatchFormat::LoHi64, PatchRole::SignalAddress});
    sites.push_back({at + 3, PatchFormat::Lo32, PatchRole::SignalValue});
  }
  void timestamp(CommandStream& cs, uint64_t, std::vector<PatchSite>&) override {
    *cs.grow(1) = 0x7;
  }
  void memory_barrier(CommandStream& cs) override { *cs.grow(1) = 0xb; }
  void exec(CommandStream& cs, const KernelObject&, uint64_t, Dim3, Dim3,
            std::vector<PatchSite>&) override {
    *cs.grow(1) = 0xe;
  }
  void copy(CommandStream& cs, uint64_t dst, uint64_t, uint64_t size,
            std::vector<PatchSite>& sites) override {
    uint32_t* w = cs.grow(size);
    for (uint64_t i = 0; i < size; i++) w[i] = 0xc0000000u | uint32_t(size);
    w[size - 1] = uint32_t(dst);
    sites.push_back({uint32_t(cs.size() - 1), PatchFormat::Lo32, PatchRole::CopyDst});
  }
};

// Host memory at device addresses of its own; queues as given.
class StubDriver final : public DeviceDriver {
 public:
  StubDriver(size_t max, size_t copy_granule) : max_(max), copy_granule_(copy_granule) {
    props_.name = "stub:0";
    props_.caps.host_reachable = props_.caps.map_host = true;
    props_.caps.copy_engine = props_.caps.indirect_buffers = true;
  }
  ~StubDriver() override {
    for (auto& [va, host] : memory_) std::free(host);
  }
  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return 1ull << 40; }
  uint64_t va_size() const override { return 1ull << 30; }
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool) override {
    void* host = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    if (!host) throw Error("stub: out of memory");
    memory_[va] = host;
    return {va, size, host, kind, 0, false};
  }
  void free(const Allocation& a) override {
    std::free(memory_.at(a.va));
    memory_.erase(a.va);
  }
  Allocation map_user(void*, uint64_t) override { throw InvalidInput("stub: no userptr"); }
  std::unique_ptr<HwQueue> create_queue(QueueKind kind) override {
    const bool compute = kind == QueueKind::Compute;
    auto q = std::make_unique<RecordingQueue>(queues++, compute ? max_ : max_ / copy_granule_ * copy_granule_,
                                              compute ? 1 : copy_granule_, log);
    (compute ? compute_queue : copy_queue) = q.get();
    return q;
  }
  std::unique_ptr<Encoder> encoder(QueueKind) override { return std::make_unique<SizedEncoder>(); }
  ProgramLayout program_layout(std::span<const std::byte>) override { return {}; }
  void wait_interrupt(std::chrono::milliseconds) override {}
  void check_faults() override {}
  std::string hang_report() override { return ""; }

  std::vector<std::pair<int, uint64_t>> log;  // (queue, address) of every indirect buffer
  RecordingQueue *compute_queue = nullptr, *copy_queue = nullptr;
  int queues = 0;

 private:
  DeviceProperties props_;
  size_t max_, copy_granule_;
  std::map<uint64_t, void*> memory_;
};

struct Stub {
  // `max`: the queues' own limit; `option`: Device::Options::max_indirect_dwords.
  explicit Stub(size_t max, uint64_t option = 0, size_t copy_granule = 1) {
    auto d = std::make_unique<StubDriver>(max, copy_granule);
    drv = d.get();
    Device::Options opt;
    opt.kernarg_ring_bytes = opt.staging_ring_bytes = 8192;
    opt.staging_chunk_bytes = 4096;
    opt.copy_queues = 1;
    opt.max_indirect_dwords = option;
    dev = std::make_unique<Device>(std::move(d), opt);
  }
  // The indirect buffers submitted so far, as (queue, offset from `base`, dwords).
  std::vector<IbRun> runs(uint64_t base) const {
    std::vector<IbRun> out;
    size_t compute = 0, copy = 0;
    for (auto& [q, va] : drv->log) {
      RecordingQueue* hw = q == 0 ? drv->compute_queue : drv->copy_queue;
      out.push_back({q, va - base, hw->sizes[q == 0 ? compute++ : copy++]});
    }
    return out;
  }
  StubDriver* drv;
  std::unique_ptr<Device> dev;
};

// Copies of 10 dwords each, a signal of 4 last: 34 dwords.
void record(CopyQueue& q, int copies) {
  for (int i = 0; i < copies; i++) q.copy(0x1000 + i, 0, 10);
  q.signal_at(0x8000, 1, false);
}

using testing_support::error_of;

TEST(IndirectSplit, ARecordingAtTheQueuesLimitIsOneIndirectBufferAndOneMoreDwordSplitsIt) {
  for (size_t max : {33, 34, 35}) {
    SCOPED_TRACE("limit " + std::to_string(max));
    Stub s(max);
    CopyQueue q(*s.dev);
    record(q, 3);
    q.bind();
    q.submit();
    ASSERT_FALSE(s.drv->log.empty());
    const uint64_t base = s.drv->log.front().second;
    if (max >= 34) {
      EXPECT_EQ(q.piece_starts(), std::vector<size_t>{0});
      EXPECT_EQ(s.runs(base), (std::vector<IbRun>{{1, 0, 34}}));
    } else {  // the signal moves to a second buffer; nothing is padded (granule 1)
      EXPECT_EQ(q.piece_starts(), (std::vector<size_t>{0, 30}));
      EXPECT_EQ(s.runs(base), (std::vector<IbRun>{{1, 0, 30}, {1, 120, 4}}));
      EXPECT_EQ(q.stream().size(), 34u);
    }
  }
}

TEST(IndirectSplit, TheDeviceOptionLowersTheLimitAndSplitsAtEveryCommandBoundary) {
  for (uint64_t option : {19, 20, 21}) {
    SCOPED_TRACE("option " + std::to_string(option));
    Stub s(1 << 20, option);
    EXPECT_EQ(s.dev->max_indirect_dwords(QueueKind::Copy), option);
    CopyQueue q(*s.dev);
    record(q, 3);
    q.bind();
    q.submit();
    const uint64_t base = s.drv->log.front().second;
    if (option == 19)  // 10 + 10 does not fit: one copy per buffer
      EXPECT_EQ(s.runs(base), (std::vector<IbRun>{{1, 0, 10}, {1, 40, 10}, {1, 80, 14}}));
    else
      EXPECT_EQ(s.runs(base), (std::vector<IbRun>{{1, 0, 20}, {1, 80, 14}}));
  }
  Stub higher(30, 1000);  // an option above the queue's own limit changes nothing
  EXPECT_EQ(higher.dev->max_indirect_dwords(QueueKind::Compute), 30u);
}

TEST(IndirectSplit, PiecesStartOnTheGranuleAfterZeroDwordsAndPatchSitesMoveWithTheirCommand) {
  for (size_t max : {15, 16, 17}) {  // granule 8: 15 gives 8, 16 and 17 give 16
    SCOPED_TRACE("limit " + std::to_string(max));
    Stub s(1 << 20, max, 8);
    CopyQueue q(*s.dev);
    if (max < 16) {  // a 10-dword copy does not fit 8
      EXPECT_EQ(error_of([&] { q.copy(0x1000, 0, 10); }),
                "stub:0: copy queue: a command of 10 dwords does not fit one indirect buffer "
                "(at most 8 dwords); recordings are split only between commands");
      continue;
    }
    record(q, 1);  // 10 dwords, then a 4-dword signal
    q.copy(0x2000, 0, 6);
    // copy (0..10), signal (10..14), copy of 6: 14 + 6 > 16, so it starts at 16.
    EXPECT_EQ(q.piece_starts(), (std::vector<size_t>{0, 16}));
    ASSERT_EQ(q.stream().size(), 22u);
    const uint32_t* w = q.stream().data();
    EXPECT_EQ(w[14], 0u);
    EXPECT_EQ(w[15], 0u);
    EXPECT_EQ(w[16], 0xc0000006u);
    EXPECT_EQ(w[21], 0x2000u);
    q.update_copy(2, 0x3000, std::nullopt);
    EXPECT_EQ(w[21], 0x3000u);  // the moved site
    EXPECT_EQ(w[13], 1u);       // the signal value, not overwritten
    q.bind();
    q.update_copy(2, 0x4000, std::nullopt);
    EXPECT_EQ(q.patch_bases().second ? q.patch_bases().second[21] : w[21], 0x4000u);
    q.submit();
    const uint64_t base = s.drv->log.front().second;
    EXPECT_EQ(s.runs(base), (std::vector<IbRun>{{1, 0, 16}, {1, 64, 6}}));
  }
}

TEST(IndirectSplit, ACommandLongerThanOneIndirectBufferIsRefusedAndTheRecordingStaysAsItWas) {
  Stub s(1 << 20, 29);
  CopyQueue q(*s.dev);
  q.copy(0x1000, 0, 10);
  EXPECT_EQ(error_of([&] { q.copy(0x1000, 0, 30); }),
            "stub:0: copy queue: a command of 30 dwords does not fit one indirect buffer (at "
            "most 29 dwords); recordings are split only between commands");
  EXPECT_EQ(q.commands(), 1u);
  EXPECT_EQ(q.stream().size(), 10u);
  q.copy(0x1000, 0, 29);  // exactly one buffer: a piece of its own
  EXPECT_EQ(q.piece_starts(), (std::vector<size_t>{0, 10}));
  EXPECT_EQ(q.commands(), 2u);
}

TEST(IndirectSplit, AnOptionBelowTheGranuleIsAClearError) {
  Stub s(1 << 20, 7, 8);
  EXPECT_EQ(error_of([&] { CopyQueue q(*s.dev); }),
            "stub:0: Options::max_indirect_dwords 7 is below the copy queue's granule of 8 "
            "dwords");
}

TEST(IndirectSplit, QueuesSubmittedTogetherKeepTheirOrderWithEveryPieceInIt) {
  Stub s(1 << 20, 20);
  ComputeQueue c(*s.dev);
  CopyQueue k(*s.dev);
  c.memory_barrier();
  record(k, 3);
  c.bind();
  k.bind();
  Queue* both[] = {&k, &c};
  Queue::submit_together(both);
  ASSERT_EQ(s.drv->log.size(), 3u);
  const uint64_t kbase = s.drv->log[0].second;
  EXPECT_EQ(s.drv->log[0], std::make_pair(1, kbase));
  EXPECT_EQ(s.drv->log[1], std::make_pair(1, kbase + 80));
  EXPECT_EQ(s.drv->log[2].first, 0);  // the compute queue's one buffer, after the copy queue's
  EXPECT_EQ(s.drv->copy_queue->sizes, (std::vector<size_t>{20, 14}));
  EXPECT_EQ(s.drv->compute_queue->sizes, (std::vector<size_t>{1}));
}

}  // namespace
}  // namespace hcq
