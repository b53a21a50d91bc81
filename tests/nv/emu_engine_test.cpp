// The emulated NVIDIA GPU on its own: channels fed by hand-written GPFIFO entries and push
// buffers, launches of the real test kernels with QMDs of every version, semaphores, copies,
// and the channel errors bad input raises.
#include "nv/emu/engine.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "kernels.hpp"
#include "nv/cubin.hpp"
#include "nv/encoders.hpp"
#include "nv/rm_abi.hpp"

namespace hcq::nv::emu {
namespace {

class Events final : public GpuEvents {
 public:
  void channel_error(uint32_t, uint32_t rc, const std::string& what) override {
    std::lock_guard lk(mu_);
    rc_ = rc;
    what_ = what;
    if (notifier_status) status_when_told_ = __atomic_load_n(notifier_status, __ATOMIC_ACQUIRE);
  }
  void nonstall_interrupt() override { interrupts_++; }
  std::pair<uint32_t, std::string> error() {
    std::lock_guard lk(mu_);
    return {rc_, what_};
  }
  // The notifier's status when the error was told: a driver that sees the status reads the
  // emulator's log next, so the log must hold the error before the status shows it.
  uint16_t status_when_told() {
    std::lock_guard lk(mu_);
    return status_when_told_;
  }
  std::atomic<int> interrupts_{0};
  const uint16_t* notifier_status = nullptr;

 private:
  std::mutex mu_;
  uint32_t rc_ = 0;
  std::string what_;
  uint16_t status_when_told_ = 0xffff;
};

// Host memory the engine sees at its own address, below 1 TiB: GPFIFO entries carry 40-bit
// push buffer addresses. Between 256 MiB and 2 GiB, which AddressSanitizer leaves free too.
struct Buf {
  Buf(Memory& m, size_t bytes) : mem(m), size((bytes + 4095) / 4096 * 4096) {
    constexpr uint64_t kFirst = 256ull << 20, kEnd = 2ull << 30;
    static std::atomic<uint64_t> next{kFirst};
    void* q = MAP_FAILED;
    for (int tries = 0; q == MAP_FAILED; tries++) {
      if (tries > 4096) throw std::runtime_error("no free address space below 2 GiB");
      uint64_t at = next.fetch_add((size + (1 << 20)) / (1 << 20) * (1 << 20));
      if (at + size > kEnd) {
        next = kFirst;  // tests free their buffers: start over
        continue;
      }
      q = ::mmap(reinterpret_cast<void*>(at), size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (q != MAP_FAILED && q != reinterpret_cast<void*>(at)) {
        ::munmap(q, size);
        q = MAP_FAILED;
      }
    }
    p = static_cast<std::byte*>(q);
    mem.map(va(), size);
  }
  ~Buf() {
    mem.unmap(va());
    ::munmap(p, size);
  }
  uint64_t va(uint64_t off = 0) const { return reinterpret_cast<uint64_t>(p) + off; }
  template <class T>
  T* at(uint64_t off) { return reinterpret_cast<T*>(p + off); }
  Memory& mem;
  size_t size;
  std::byte* p;
};

constexpr uint32_t kEntries = 64;

class Gpu {
 public:
  explicit Gpu(QmdVersion v)
      : classes_{Gen::Hopper, rm::HOPPER_COMPUTE_A, rm::HOPPER_DMA_COPY_A, v},
        ring_(mem_, kEntries * 8 + 512), push_(mem_, 1 << 16), notifier_(mem_, 16),
        engine_(classes_, mem_, events_) {
    events_.notifier_status = notifier_.at<uint16_t>(14);
    engine_.watch_doorbell(&doorbell_);
    ChannelDesc d;
    d.id = 0x77;
    d.token = 5;
    d.gpfifo_va = ring_.va();
    d.entries = kEntries;
    d.userd_va = ring_.va(kEntries * 8);
    d.notifier_va = notifier_.va();
    d.name = "test channel";
    engine_.add_channel(d);
    std::vector<uint32_t> setup =
        ComputeEncoder::setup(classes_.compute_class, 0x729400000000, 0x729300000000);
    auto copy = CopyEncoder::setup(classes_.copy_class);
    setup.insert(setup.end(), copy.begin(), copy.end());
    submit(setup);
  }
  void submit(const std::vector<uint32_t>& w) { submit_at(w, push_.va(used_)); }
  // A segment at any address (the engine faults when it is not mapped).
  void submit_at(const std::vector<uint32_t>& w, uint64_t va) {
    if (va >= push_.va() && va < push_.va() + push_.size) {
      std::memcpy(push_.p + (va - push_.va()), w.data(), w.size() * 4);
      used_ = (va - push_.va()) + (w.size() * 4 + 7) / 8 * 8;
    }
    *ring_.at<uint64_t>(put_ * 8) = encode_gpfifo({va, uint32_t(w.size()), true, false});
    put_ = (put_ + 1) % kEntries;
    __atomic_store_n(ring_.at<uint32_t>(kEntries * 8 + offsetof(rm::Userd, GPPut)), put_,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&doorbell_, 5u, __ATOMIC_RELEASE);
  }
  void set_gp_put(uint32_t v) {
    __atomic_store_n(ring_.at<uint32_t>(kEntries * 8 + offsetof(rm::Userd, GPPut)), v,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&doorbell_, 5u, __ATOMIC_RELEASE);
  }
  uint32_t gp_get() {
    return __atomic_load_n(ring_.at<uint32_t>(kEntries * 8 + offsetof(rm::Userd, GPGet)),
                           __ATOMIC_ACQUIRE);
  }
  bool until(const std::function<bool()>& f) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end) {
      if (f()) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return f();
  }
  // Waits for the channel error and returns it; checks the notifier RM-style.
  std::pair<uint32_t, std::string> error() {
    // The log is told first, then the notifier written: wait for both.
    EXPECT_TRUE(until([&] {
      return events_.error().first != 0 &&
             __atomic_load_n(notifier_.at<uint16_t>(14), __ATOMIC_ACQUIRE) != 0;
    }));
    auto e = events_.error();
    EXPECT_EQ(*notifier_.at<uint32_t>(8), e.first);                  // info32
    EXPECT_EQ(*notifier_.at<uint16_t>(14), kNotifierErrorStatus);    // status
    EXPECT_EQ(events_.status_when_told(), 0) << "the notifier showed the error before the log had it";
    return e;
  }

  GpuClasses classes_;
  Memory mem_;
  Events events_;
  Buf ring_, push_, notifier_;
  volatile uint32_t doorbell_ = kDoorbellIdle;
  Engine engine_;
  uint32_t put_ = 0;
  uint64_t used_ = 0;
};

std::vector<uint32_t> sem(bool release, uint64_t va, uint64_t value, uint32_t op = 0) {
  CommandStream cs;
  std::vector<PatchSite> s;
  if (release)
    encode_semaphore_release(cs, va, value, false, false, s);
  else
    encode_semaphore_wait(cs, va, value, s);
  std::vector<uint32_t> w(cs.data(), cs.data() + cs.size());
  if (op) w[5] = HOST_SEM_EXECUTE_OPERATION_ALL(op) | HOST_SEM_EXECUTE_PAYLOAD_SIZE_ALL(1);
  return w;
}

class QmdVersions : public ::testing::TestWithParam<QmdVersion> {};

TEST_P(QmdVersions, LaunchesRunTheKernelOverTheGridFromTheQmd) {
  auto image = kernels::code_object("sm_90");
  if (image.empty()) GTEST_SKIP() << "no sm_90 cubin (nvcc was not found at build time)";
  kernels::register_cpu_implementations();
  Gpu gpu(GetParam());
  Cubin cubin = parse_cubin(image);
  Buf code(gpu.mem_, cubin.image_bytes), out(gpu.mem_, 4096 * 4), args(gpu.mem_, 4096),
      sig(gpu.mem_, 64);
  std::memcpy(code.p, image.data(), image.size());
  const CubinKernel* ck = cubin.find("fill_u32");
  ASSERT_NE(ck, nullptr);
  NvKernel k;
  k.name = ck->name;
  k.code_va = code.va(ck->code_offset);
  k.param_base = ck->param_base;
  k.cbuf0_bytes = ck->param_base + ck->param_bytes;
  k.registers = ck->registers;
  ComputeEncoder enc(GetParam());
  enc.prepare(k);
  // fill_u32(dst, value, n, block) in constant bank 0 after the QMD.
  std::byte* p = args.p + cbuf0_offset(GetParam()) + ck->param_base;
  const uint64_t dst = out.va();
  const uint32_t value = 0xabc, n = 3000, block = 128;
  std::memcpy(p, &dst, 8);
  std::memcpy(p + 8, &value, 4);
  std::memcpy(p + 12, &n, 4);
  std::memcpy(p + 16, &block, 4);
  CommandStream cs;
  std::vector<PatchSite> s;
  enc.exec(cs, k, args.va(), {(n + block - 1) / block, 1, 1}, {block, 1, 1}, s);
  enc.signal(cs, sig.va(), 1, true, s);
  gpu.submit({cs.data(), cs.data() + cs.size()});
  ASSERT_TRUE(gpu.until([&] { return *sig.at<uint64_t>(0) == 1; })) << gpu.events_.error().second;
  for (uint32_t i = 0; i < n; i++) ASSERT_EQ(out.at<uint32_t>(0)[i], value) << i;
  EXPECT_EQ(out.at<uint32_t>(0)[n], 0u);
  EXPECT_GE(gpu.events_.interrupts_.load(), 1);
  // The inline DMA wrote the launch dimensions after the QMD: blockDim then gridDim.
  const uint32_t* dims = reinterpret_cast<const uint32_t*>(args.p + qmd_bytes(GetParam()));
  EXPECT_EQ(std::vector<uint32_t>(dims, dims + 6), (std::vector<uint32_t>{128, 1, 1, 24, 1, 1}));
}

TEST_P(QmdVersions, AQmdOfAnotherVersionIsAChannelError) {
  Gpu gpu(GetParam());
  Buf args(gpu.mem_, 4096);
  NvKernel k;
  k.name = "k";
  k.code_va = 0x1000;
  const QmdVersion other = GetParam() == QmdVersion::V03 ? QmdVersion::V05 : QmdVersion::V03;
  ComputeEncoder enc(other);
  enc.prepare(k);
  CommandStream cs;
  std::vector<PatchSite> s;
  enc.exec(cs, k, args.va(), {1, 1, 1}, {1, 1, 1}, s);
  gpu.submit({cs.data(), cs.data() + cs.size()});
  auto [rc, what] = gpu.error();
  EXPECT_EQ(rc, kRcGrException);
  // Read with this GPU's layout, the other version's QMD has another major version.
  EXPECT_NE(what.find("QMD at " + hex(args.va()) + ": QMD_MAJOR_VERSION is "), std::string::npos)
      << what;
  EXPECT_NE(what.find("this GPU's compute class 0xcbc0 takes V0" + std::to_string(int(GetParam())) +
                      " QMDs"),
            std::string::npos)
      << what;
}

INSTANTIATE_TEST_SUITE_P(NvEngine, QmdVersions,
                         ::testing::Values(QmdVersion::V03, QmdVersion::V04, QmdVersion::V05),
                         [](const auto& info) { return "V0" + std::to_string(int(info.param)); });

TEST(NvEngine, AnAcquireBlocksTheChannelUntilTheValueArrives) {
  Gpu gpu(QmdVersion::V03);
  Buf sig(gpu.mem_, 64);
  auto w = sem(false, sig.va(), 0x100000005);        // strict >= on 64 bits
  auto r = sem(true, sig.va(8), 1);
  w.insert(w.end(), r.begin(), r.end());
  gpu.submit(w);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(*sig.at<uint64_t>(8), 0u);  // still waiting
  *sig.at<uint64_t>(0) = 0x100000004;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(*sig.at<uint64_t>(8), 0u);  // one short
  __atomic_store_n(sig.at<uint64_t>(0), 0x100000005ull, __ATOMIC_RELEASE);
  EXPECT_TRUE(gpu.until([&] { return *sig.at<uint64_t>(8) == 1; }));
  // ACQ_CIRC_GEQ: 2 is "after" 0xffffffff'fffffffe once the value wrapped.
  *sig.at<uint64_t>(0) = 2;
  auto c = sem(false, sig.va(), 0xfffffffffffffffeull, 3);
  auto r2 = sem(true, sig.va(8), 2);
  c.insert(c.end(), r2.begin(), r2.end());
  gpu.submit(c);
  EXPECT_TRUE(gpu.until([&] { return *sig.at<uint64_t>(8) == 2; }));
}

// GP_GET moves past an entry once its last 1024 dwords are fetched, as a PBDMA fetches ahead:
// a channel blocked on an acquire near a segment's end has GP_GET past that segment; one
// blocked with more than the look-ahead still to go has not. The segment then runs from what
// was fetched, whatever memory holds after.
TEST(NvEngine, GpGetPassesASegmentOnceItsEndIsFetched) {
  Gpu gpu(QmdVersion::V03);
  Buf sig(gpu.mem_, 64);
  ASSERT_TRUE(gpu.until([&] { return gpu.gp_get() == 1; }));  // past the setup entry
  const uint32_t before = 1;
  auto near_end = std::vector<uint32_t>(2000, 0);  // NOPs, then the acquire and a release
  auto w = sem(false, sig.va(), 1);
  auto r = sem(true, sig.va(8), 7);
  near_end.insert(near_end.end(), w.begin(), w.end());
  near_end.insert(near_end.end(), r.begin(), r.end());
  gpu.submit(near_end);
  EXPECT_TRUE(gpu.until([&] { return gpu.gp_get() == before + 1; }));  // fetched, waiting
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(*sig.at<uint64_t>(8), 0u);  // still on the acquire
  __atomic_store_n(sig.at<uint64_t>(0), 1ull, __ATOMIC_RELEASE);
  EXPECT_TRUE(gpu.until([&] { return *sig.at<uint64_t>(8) == 7; }));

  auto far_from_end = sem(false, sig.va(), 2);  // the acquire, then 2000 NOPs and a release
  far_from_end.resize(far_from_end.size() + 2000, 0);
  auto r2 = sem(true, sig.va(8), 8);
  far_from_end.insert(far_from_end.end(), r2.begin(), r2.end());
  gpu.submit(far_from_end);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(gpu.gp_get(), before + 1);  // blocked with the segment's end not yet fetched
  __atomic_store_n(sig.at<uint64_t>(0), 2ull, __ATOMIC_RELEASE);
  EXPECT_TRUE(gpu.until([&] { return *sig.at<uint64_t>(8) == 8; }));
  EXPECT_EQ(gpu.gp_get(), before + 2);
}

TEST(NvEngine, CopiesLinearAndPitchedWithAFourWordRelease) {
  Gpu gpu(QmdVersion::V03);
  Buf src(gpu.mem_, 8192), dst(gpu.mem_, 8192), sig(gpu.mem_, 64);
  for (int i = 0; i < 8192; i++) src.p[i] = std::byte(i * 7);
  CommandStream cs;
  std::vector<PatchSite> s;
  CopyEncoder().copy(cs, dst.va(1), src.va(3), 1000, s);
  std::vector<uint32_t> w(cs.data(), cs.data() + cs.size());
  // 3 lines of 16 bytes, pitch 100 in, 32 out, to dst+2048; then a four-word release.
  const uint32_t pitched[] = {
      inc(kSubCopy, COPY_OFFSET_IN_UPPER, 4), 0, uint32_t(src.va()), uint32_t(dst.va() >> 32),
      uint32_t(dst.va(2048)),
      inc(kSubCopy, COPY_PITCH_IN, 4), 100, 32, 16, 3,
      inc(kSubCopy, COPY_SET_SEMAPHORE_A, 4), uint32_t(sig.va() >> 32), uint32_t(sig.va()), 9, 0,
      inc(kSubCopy, COPY_LAUNCH_DMA, 1),
      COPY_LAUNCH_DMA_DATA_TRANSFER_TYPE_ALL(2) | COPY_LAUNCH_DMA_SRC_MEMORY_LAYOUT_ALL(1) |
          COPY_LAUNCH_DMA_DST_MEMORY_LAYOUT_ALL(1) | COPY_LAUNCH_DMA_MULTI_LINE_ENABLE_ALL(1) |
          COPY_LAUNCH_DMA_SEMAPHORE_TYPE_ALL(2)};
  std::vector<uint32_t> pw(std::begin(pitched), std::end(pitched));
  pw[1] = uint32_t(src.va() >> 32);
  w.insert(w.end(), pw.begin(), pw.end());
  gpu.submit(w);
  ASSERT_TRUE(gpu.until([&] { return *sig.at<uint32_t>(0) == 9; })) << gpu.events_.error().second;
  EXPECT_EQ(std::memcmp(dst.p + 1, src.p + 3, 1000), 0);
  EXPECT_EQ(dst.p[0], std::byte{0});
  for (int l = 0; l < 3; l++)
    EXPECT_EQ(std::memcmp(dst.p + 2048 + l * 32, src.p + l * 100, 16), 0) << l;
  EXPECT_EQ(dst.p[2048 + 16], std::byte{0});
  EXPECT_GT(*sig.at<uint64_t>(8), 0u);  // the timestamp of a four-word release
}

TEST(NvEngine, BadMethodsStopTheChannelWithAnErrorNamingThem) {
  struct Case {
    std::vector<uint32_t> words;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{inc(kSubHost, 0x44, 1), 1}, "unknown HOST method 0x44 (data 0x1)"},
      {{inc(2, 0x200, 1), 1}, "method 0x200 on subchannel 2, which has no class"},
      {{inc(3, 0, 1), 0xc7c0}, "SET_OBJECT of class 0xc7c0 on subchannel 3: this GPU's compute "
                               "class is 0xcbc0, its copy class 0xc8b5"},
      {{inc(kSubCompute, COMPUTE_LOAD_INLINE_DATA, 1), 5},
       "LOAD_INLINE_DATA with no inline transfer in progress"},
      {{0x20050017}, "method header 0x20050017 has 5 data dwords, the segment 0 more"},
      {{inc(kSubHost, HOST_SEM_EXECUTE, 1), 6}, "SEM_EXECUTE operation 6 (hcq's GPUs do 0 to 3)"},
  };
  for (auto& c : cases) {
    Gpu gpu(QmdVersion::V03);
    gpu.submit(c.words);
    auto [rc, what] = gpu.error();
    EXPECT_EQ(rc, kRcGrException);
    EXPECT_NE(what.find("test channel: GPFIFO entry 1, push buffer "), std::string::npos) << what;
    EXPECT_NE(what.find("dword 0: " + c.says), std::string::npos) << what;
    EXPECT_EQ(gpu.gp_get(), 2u);  // fetched the bad entry (the error names it: entry 1)
  }
}

// Hopper refuses a shared memory window off a 4 GiB boundary as a class error (Xid 69), as an
// H200 did for 0xfe000000.
TEST(NvEngine, AnUnalignedSharedWindowIsAClassError) {
  Gpu gpu(QmdVersion::V04);
  gpu.submit(ComputeEncoder::setup(rm::HOPPER_COMPUTE_A, 0xfe000000, 0xff000000));
  auto [rc, what] = gpu.error();
  EXPECT_EQ(rc, kRcGrClassError);
  EXPECT_NE(what.find("dword 2: SET_SHADER_SHARED_MEMORY_WINDOW_B 0xfe000000: the shared memory "
                      "window must be 4 GiB aligned on Hopper and later"),
            std::string::npos)
      << what;
}

TEST(NvEngine, UnmappedAddressesAreMmuFaults) {
  {
    Gpu gpu(QmdVersion::V03);
    gpu.submit_at({0, 0}, 0xdead0000);
    auto [rc, what] = gpu.error();
    EXPECT_EQ(rc, kRcMmuFault);
    EXPECT_NE(what.find("MMU fault at 0xdead0000: GPU address 0xdead0000 is not mapped"),
              std::string::npos)
        << what;
  }
  {
    Gpu gpu(QmdVersion::V03);
    gpu.submit(sem(true, 0xbad000, 1));
    auto [rc, what] = gpu.error();
    EXPECT_EQ(rc, kRcMmuFault);
    EXPECT_NE(what.find("dword 0: GPU address 0xbad000 is not mapped"), std::string::npos) << what;
  }
  {
    Gpu gpu(QmdVersion::V03);
    gpu.set_gp_put(kEntries + 3);
    auto [rc, what] = gpu.error();
    EXPECT_EQ(what, "test channel: GP_PUT 67 is past the GPFIFO's 64 entries");
  }
}

TEST(NvEngine, ChannelsWaitForTheDoorbell) {
  Gpu gpu(QmdVersion::V03);
  ASSERT_TRUE(gpu.until([&] { return gpu.gp_get() == 1; }));  // the setup entry ran
  Buf sig(gpu.mem_, 64);
  auto w = sem(true, sig.va(), 3);
  std::memcpy(gpu.push_.p + 1024, w.data(), w.size() * 4);
  *gpu.ring_.at<uint64_t>(8) = encode_gpfifo({gpu.push_.va(1024), uint32_t(w.size()), true, false});
  __atomic_store_n(gpu.ring_.at<uint32_t>(kEntries * 8 + offsetof(rm::Userd, GPPut)), 2u,
                   __ATOMIC_RELEASE);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(*sig.at<uint64_t>(0), 0u);  // GP_PUT moved, but nobody rang
  __atomic_store_n(&gpu.doorbell_, 5u, __ATOMIC_RELEASE);
  EXPECT_TRUE(gpu.until([&] { return *sig.at<uint64_t>(0) == 3; }));
}

}  // namespace
}  // namespace hcq::nv::emu
