// libFuzzer target: a follower (`hcq dump --follow`) on a live capture ring whose header and
// data a hostile or damaged writer wrote. One ring of 4 KiB lives for the whole run; this
// process holds its writer role. Each input gives the ring header's fields (capacity, head,
// tail, generation, writer pid and start time, state, dropped; the first 192 bytes, as
// RingHeader lays them out) and the data after it. The follower attaches while the ring says
// it is open, the state the input gives is stored, the ring is marked closed, and the records
// are read through capture::Reader as `hcq dump --follow` reads them. Checks: the follower
// either refuses the ring or reads at most what the ring can hold past the tail, then ends;
// every failure is an hcq::Error; no sanitizer report.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/capture.hpp"
#include "core/capture_ring.hpp"
#include "core/error.hpp"
#include "os/shm.hpp"

namespace c = hcq::capture;

namespace {

constexpr uint64_t kData = 4096;

struct Ring {
  std::string name = "hcq-fuzz-ring-" + std::to_string(::getpid());
  std::unique_ptr<hcq::os::SharedSegment> seg;
  c::RingHeader* h = nullptr;
  Ring() {
    seg = std::make_unique<hcq::os::SharedSegment>(name, c::kRingLayout,
                                                   sizeof(c::RingHeader) + kData);
    if (!seg->hold_role(c::kWriterRole)) std::abort();
    h = reinterpret_cast<c::RingHeader*>(seg->payload());
  }
};

// Counts what the follower hands the reader: never more than the ring could have held.
class Counted : public c::Source {
 public:
  explicit Counted(std::unique_ptr<c::RingSource> s) : s_(std::move(s)) {}
  size_t read_some(void* p, size_t n) override {
    const size_t got = s_->read_some(p, n);
    total_ += got;
    if (total_ > 16 + kData) std::abort();  // the file header, then one ring's worth at most
    return got;
  }
  void commit() override { s_->commit(); }

 private:
  std::unique_ptr<c::RingSource> s_;
  uint64_t total_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Ring ring;
  if (size < sizeof(c::RingHeader)) return 0;
  c::RingHeader given;
  std::memcpy(&given, data, sizeof given);
  std::byte* payload = ring.seg->payload();
  std::memset(payload + sizeof(c::RingHeader), 0, kData);
  std::memcpy(payload + sizeof(c::RingHeader), data + sizeof given,
              std::min<size_t>(size - sizeof given, kData));
  // Open while the follower attaches (it waits for an open ring), then the input's words.
  std::memcpy(ring.h, &given, sizeof given);
  std::atomic_ref<uint32_t>(ring.h->state).store(c::RingHeader::kOpen);
  try {
    auto src = std::make_unique<c::RingSource>(ring.name, std::chrono::milliseconds(2000));
    std::atomic_ref<uint32_t>(ring.h->state).store(c::RingHeader::kClosed);
    c::Reader r(std::make_unique<Counted>(std::move(src)), "shm:" + ring.name);
    for (int i = 0; i < 10000 && r.next(); i++) {
    }
  } catch (const hcq::Error& e) {
    if (std::getenv("FUZZ_RING_VERBOSE")) std::fprintf(stderr, "%s\n", e.what());
  }
  return 0;
}
