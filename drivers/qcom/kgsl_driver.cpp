#include "qcom/kgsl_driver.hpp"

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "core/device.hpp"
#include "core/error.hpp"
#include "qcom/decode.hpp"
#include "qcom/emu/kgsl.hpp"
#include "qcom/encoders.hpp"
#include "qcom/kgsl_abi.hpp"
#include "qcom/program.hpp"
#include "qcom/targets.hpp"

namespace hcq::qcom {
namespace {

using namespace kgsl;

constexpr const char* kNode = "/dev/kgsl-3d0";
constexpr uint64_t kPage = 4096;
constexpr uint64_t kPrivateVa = 1ull << 30;
constexpr uint64_t kHeapVa = 64ull << 30;
constexpr uint64_t kRingBytes = 1 << 20;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

class KgslDriver;

// The context's command stream: words for direct submissions go into a ring of GPU memory, and
// every submission is a GPU_COMMAND naming its indirect buffers.
class KgslQueue final : public HwQueue {
 public:
  explicit KgslQueue(KgslDriver& drv);
  void submit(const uint32_t* words, size_t n) override;
  void submit_indirect(uint64_t va, size_t ndwords, std::span<const uint32_t> before,
                       std::span<const uint32_t> after) override;
  std::string report();
  uint32_t last_timestamp() const { return last_ts_.load(std::memory_order_acquire); }

 private:
  struct Submitted {
    uint32_t timestamp;
    std::vector<CommandObject> ibs;
    uint64_t ring_end;  // ring bytes (monotonic) it freed when retired
  };
  uint64_t put_words(const uint32_t* w, size_t n);
  void retire(uint32_t retired);
  int send(std::vector<CommandObject> ibs);  // 0, or the ioctl's -errno
  KgslDriver& drv_;
  Allocation ring_;
  uint64_t put_ = 0, done_ = 0;
  std::deque<Submitted> inflight_;
  std::atomic<uint32_t> last_ts_{0};
  std::mutex mu_;
};

class KgslDriver final : public DeviceDriver {
 public:
  KgslDriver(std::shared_ptr<os::Kernel> kernel, const std::string& name);
  ~KgslDriver() override;

  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return reserve_base_ + kPrivateVa; }
  uint64_t va_size() const override { return kHeapVa; }
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) override;
  void free(const Allocation& a) override;
  Allocation map_user(void* host, uint64_t size) override;
  std::unique_ptr<HwQueue> create_queue(QueueKind kind) override;
  std::unique_ptr<hcq::Encoder> encoder(QueueKind) override {
    return std::make_unique<CpEncoder>(gen_, mem_);
  }
  std::unique_ptr<ProgramImage> load_program(Device& dev, std::span<const std::byte> image) override;
  void wait_interrupt(std::chrono::milliseconds timeout) override;
  void check_faults() override;
  std::string hang_report() override;

  int ioctl(unsigned long req, void* arg) { return kernel_->ioctl(fd_, req, arg); }
  uint32_t context() const { return context_; }
  Gen gen() const { return gen_; }
  Allocation private_alloc(uint64_t size);
  [[noreturn]] void raise_fault(const std::string& what);
  // A KGSL error from a context call: EDEADLK means the context faulted.
  [[noreturn]] void fail(const char* what, int r);

 private:
  void reserve(uint64_t va, uint64_t size);
  std::shared_ptr<os::Kernel> kernel_;
  DeviceProperties props_;
  int fd_ = -1;
  uint32_t context_ = 0;
  Gen gen_ = Gen::A6xx;
  EncoderMemory mem_;
  uint64_t reserve_base_ = 0, private_next_ = 0;
  std::mutex mu_;
  std::vector<Allocation> private_allocs_;
  KgslQueue* queue_ = nullptr;
  std::mutex fault_mu_;
  std::string fault_;
  std::atomic<bool> faulted_{false};
};

// ---- driver ---------------------------------------------------------------------------

KgslDriver::KgslDriver(std::shared_ptr<os::Kernel> kernel, const std::string& name)
    : kernel_(std::move(kernel)) {
  props_.name = name;
  fd_ = kernel_->open(kNode, O_RDWR | O_CLOEXEC);
  if (fd_ < 0) throw OsError(name + ": open " + kNode, -fd_);
  DevInfo info{};
  DeviceGetProperty prop{};
  prop.type = KGSL_PROP_DEVICE_INFO;
  prop.value = reinterpret_cast<uint64_t>(&info);
  prop.sizebytes = sizeof(info);
  if (int r = ioctl(IOCTL_KGSL_DEVICE_GETPROPERTY, &prop); r < 0)
    throw OsError(name + ": IOCTL_KGSL_DEVICE_GETPROPERTY (device info)", -r);
  const int family = adreno_family(info.chip_id);
  if (family != 6 && family != 7)
    throw Error(name + ": chip id " + hex(info.chip_id) + " is not an Adreno a6xx or a7xx, " +
                "the generations hcq writes packets for");
  gen_ = family == 6 ? Gen::A6xx : Gen::A7xx;

  // A compute context without GMEM, one fault and it is done (tinygrad ops_qcom.py's flags).
  DrawctxtCreate c{};
  c.flags = KGSL_CONTEXT_NO_GMEM_ALLOC | KGSL_CONTEXT_PREAMBLE | KGSL_CONTEXT_NO_FAULT_TOLERANCE |
            context_type(KGSL_CONTEXT_TYPE_CL) | context_priority(8);
  if (int r = ioctl(IOCTL_KGSL_DRAWCTXT_CREATE, &c); r < 0)
    throw OsError(name + ": IOCTL_KGSL_DRAWCTXT_CREATE", -r);
  context_ = c.drawctxt_id;

  void* base = kernel_->mmap(nullptr, kPrivateVa + kHeapVa, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) throw OsError(name + ": reserving GPU address space", errno);
  reserve_base_ = reinterpret_cast<uint64_t>(base);
  private_next_ = reserve_base_;
  Allocation scratch = private_alloc(kPage);
  *static_cast<uint32_t*>(scratch.host) = 1;  // CP_COND_EXEC's condition
  mem_ = {scratch.va, scratch.va + 64};

  const Target* t = nullptr;
  for (auto& x : targets())
    if (x.chip_id == info.chip_id) t = &x;
  props_.vendor = "Qualcomm";
  props_.arch = chip_name(info.chip_id);
  props_.emulated = kernel_->emulated();
  props_.description = kernel_->emulated() && t ? t->marketing_name
                                                : "Adreno " + props_.arch + " (KGSL, chip id " +
                                                      hex(info.chip_id) + ")";
  props_.timestamp_hz = kAlwaysOnHz;
  props_.compute_units = t ? t->shader_processors : 0;
  props_.wave_size = 64;
  props_.device_memory_bytes = t ? t->memory_bytes : 0;
  props_.caps.copy_engine = false;  // copies are host copies on the shared memory, or kernels
  props_.caps.uma = true;
}

KgslDriver::~KgslDriver() {
  for (auto& a : private_allocs_) free(a);
  if (context_) {
    DrawctxtDestroy d{context_};
    ioctl(IOCTL_KGSL_DRAWCTXT_DESTROY, &d);
  }
  if (reserve_base_) kernel_->munmap(reinterpret_cast<void*>(reserve_base_), kPrivateVa + kHeapVa);
  if (fd_ >= 0) kernel_->close(fd_);
}

void KgslDriver::reserve(uint64_t va, uint64_t size) {
  kernel_->mmap(reinterpret_cast<void*>(va), size, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

Allocation KgslDriver::allocate(uint64_t va, uint64_t size, MemoryKind kind, bool) {
  size = align_up(size, kPage);
  // SVM: with USE_CPU_MAP the GPU address is where the process maps the object. Device memory
  // write-combined, host memory cached and kept coherent by the hardware (IOCOHERENT).
  GpuobjAlloc a{};
  a.size = size;
  a.flags = KGSL_MEMFLAGS_USE_CPU_MAP |
            (kind == MemoryKind::Device
                 ? memflags_cachemode(KGSL_CACHEMODE_WRITECOMBINE)
                 : memflags_cachemode(KGSL_CACHEMODE_WRITEBACK) | KGSL_MEMFLAGS_IOCOHERENT);
  if (int r = ioctl(IOCTL_KGSL_GPUOBJ_ALLOC, &a); r < 0)
    throw OsError(props_.name + ": IOCTL_KGSL_GPUOBJ_ALLOC (" + std::to_string(size) +
                      " bytes of " + to_string(kind) + " memory)",
                  -r);
  auto release = [&] {
    GpuobjFree f{};
    f.id = a.id;
    ioctl(IOCTL_KGSL_GPUOBJ_FREE, &f);
  };
  void* p = kernel_->mmap(reinterpret_cast<void*>(va), a.mmapsize, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_FIXED, fd_, off_t(mmap_offset_of(a.id)));
  if (p == MAP_FAILED) {
    int e = errno;
    release();
    throw OsError(props_.name + ": mmap of GPU object " + std::to_string(a.id) + " at " + hex(va), e);
  }
  GpuobjInfo info{};
  info.id = a.id;
  if (int r = ioctl(IOCTL_KGSL_GPUOBJ_INFO, &info); r < 0 || info.gpuaddr != va) {
    reserve(va, size);
    release();
    throw Error(props_.name + ": GPU object " + std::to_string(a.id) + " is at GPU address " +
                hex(info.gpuaddr) + ", not at its CPU address " + hex(va) +
                " (KGSL without SVM support?)");
  }
  return Allocation{va, size, p, kind, a.id};
}

void KgslDriver::free(const Allocation& a) {
  if (a.user) {
    SharedmemFree f{a.va};
    ioctl(IOCTL_KGSL_SHAREDMEM_FREE, &f);
    return;
  }
  reserve(a.va, a.size);  // drops the CPU mapping, keeps the range ours
  GpuobjFree f{};
  f.id = uint32_t(a.handle);
  ioctl(IOCTL_KGSL_GPUOBJ_FREE, &f);
}

Allocation KgslDriver::map_user(void* host, uint64_t size) {
  MapUserMem m{};
  m.hostptr = reinterpret_cast<uint64_t>(host);
  m.len = size;
  m.memtype = KGSL_USER_MEM_TYPE_ADDR;
  m.flags = uint32_t(KGSL_MEMFLAGS_USE_CPU_MAP);
  if (int r = ioctl(IOCTL_KGSL_MAP_USER_MEM, &m); r < 0)
    throw OsError(props_.name + ": IOCTL_KGSL_MAP_USER_MEM at " + hex(m.hostptr), -r);
  if (m.gpuaddr != m.hostptr) {
    SharedmemFree f{m.gpuaddr};
    ioctl(IOCTL_KGSL_SHAREDMEM_FREE, &f);
    throw Error(props_.name + ": host memory at " + hex(m.hostptr) + " got GPU address " +
                hex(m.gpuaddr) + " (hcq needs the same address)");
  }
  Allocation out{m.hostptr, size, host, MemoryKind::Host, 0};
  out.user = true;
  return out;
}

Allocation KgslDriver::private_alloc(uint64_t size) {
  uint64_t va;
  {
    std::lock_guard lk(mu_);
    size = align_up(size, kPage);
    va = align_up(private_next_, std::min<uint64_t>(size, 2 << 20));
    if (va + size > reserve_base_ + kPrivateVa)
      throw Error(props_.name + ": driver-private GPU address space exhausted");
    private_next_ = va + size;
  }
  Allocation a = allocate(va, size, MemoryKind::Host, false);
  std::lock_guard lk(mu_);
  private_allocs_.push_back(a);
  return a;
}

std::unique_ptr<HwQueue> KgslDriver::create_queue(QueueKind kind) {
  if (kind != QueueKind::Compute)
    throw InvalidInput(props_.name + ": Adreno GPUs have no copy engine (no copy queues)");
  if (queue_) throw InvalidInput(props_.name + ": one compute queue per KGSL context");
  auto q = std::make_unique<KgslQueue>(*this);
  queue_ = q.get();
  return q;
}

void KgslDriver::fail(const char* what, int r) {
  if (r == -EDEADLK || r == -EPROTO)
    raise_fault(std::string("the GPU faulted on KGSL context ") + std::to_string(context_) +
                " (" + what + ": " + std::strerror(-r) + ")");
  throw OsError(props_.name + ": " + what, -r);
}

[[noreturn]] void KgslDriver::raise_fault(const std::string& what) {
  std::lock_guard lk(fault_mu_);
  if (fault_.empty()) {
    std::string report = queue_ ? queue_->report() : "";
    auto detail = kernel_->read_file(emu::kEmulatorFaultLog);
    if (detail && !detail->empty()) {
      while (!detail->empty() && detail->back() == '\n') detail->pop_back();
      report = "\nemulated GPU: " + *detail + (report.empty() ? "" : "\n" + report);
    } else if (!report.empty()) {
      report = "\n" + report;
    }
    fault_ = props_.name + ": " + what + report;
  }
  faulted_.store(true, std::memory_order_release);
  throw GpuFaultError(fault_);
}

void KgslDriver::check_faults() {
  if (!faulted_.load(std::memory_order_acquire)) return;
  std::lock_guard lk(fault_mu_);
  throw GpuFaultError(fault_);
}

void KgslDriver::wait_interrupt(std::chrono::milliseconds timeout) {
  check_faults();
  // KGSL wakes the caller when the context's timestamp retires: the newest submission's.
  const auto start = std::chrono::steady_clock::now();
  DeviceWaittimestampCtxtid w{context_, queue_ ? queue_->last_timestamp() : 0,
                              uint32_t(std::max<int64_t>(1, timeout.count()))};
  int r = ioctl(IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, &w);
  if (r < 0 && r != -ETIMEDOUT) fail("IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID", r);
  // Everything retired already: the awaited value comes from elsewhere (the host, another
  // device); poll again shortly rather than spin.
  if (r == 0 && std::chrono::steady_clock::now() - start < std::chrono::microseconds(50))
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

std::string KgslDriver::hang_report() { return queue_ ? queue_->report() : ""; }

// ---- queue ----------------------------------------------------------------------------

KgslQueue::KgslQueue(KgslDriver& drv) : drv_(drv), ring_(drv.private_alloc(kRingBytes)) {}

void KgslQueue::retire(uint32_t retired) {
  while (!inflight_.empty() && int32_t(retired - inflight_.front().timestamp) >= 0) {
    if (inflight_.front().ring_end) done_ = inflight_.front().ring_end;
    inflight_.pop_front();
  }
}

uint64_t KgslQueue::put_words(const uint32_t* w, size_t n) {
  const uint64_t bytes = n * 4;
  if (bytes > kRingBytes / 2)
    throw InvalidInput(drv_.properties().name + ": a submission of " + std::to_string(bytes) +
                       " bytes does not fit the command ring; bind it instead");
  uint64_t pos = put_ % kRingBytes;
  const uint64_t pad = pos + bytes > kRingBytes ? kRingBytes - pos : 0;
  const auto start = std::chrono::steady_clock::now();
  while (put_ + pad + bytes - done_ > kRingBytes) {
    CmdstreamReadtimestampCtxtid t{drv_.context(), KGSL_TIMESTAMP_RETIRED, 0};
    if (int r = drv_.ioctl(IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID, &t); r < 0)
      drv_.fail("IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID", r);
    retire(t.timestamp);
    if (put_ + pad + bytes - done_ <= kRingBytes) break;
    DeviceWaittimestampCtxtid wt{drv_.context(), inflight_.front().timestamp, 10};
    if (int r = drv_.ioctl(IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, &wt); r < 0 && r != -ETIMEDOUT)
      drv_.fail("IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID", r);
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
      throw TimeoutError(drv_.properties().name + ": command ring full for 10 s");
  }
  put_ += pad;
  pos = put_ % kRingBytes;
  std::memcpy(static_cast<char*>(ring_.host) + pos, w, bytes);
  put_ += bytes;
  return ring_.va + pos;
}

int KgslQueue::send(std::vector<CommandObject> ibs) {
  GpuCommand g{};
  g.cmdlist = reinterpret_cast<uint64_t>(ibs.data());
  g.cmdsize = sizeof(CommandObject);
  g.numcmds = uint32_t(ibs.size());
  g.context_id = drv_.context();
  if (int r = drv_.ioctl(IOCTL_KGSL_GPU_COMMAND, &g); r < 0) return r;
  inflight_.push_back({g.timestamp, std::move(ibs), put_});
  last_ts_.store(g.timestamp, std::memory_order_release);
  return 0;
}

void KgslQueue::submit(const uint32_t* words, size_t n) {
  drv_.check_faults();
  int r = 0;
  {
    std::lock_guard lk(mu_);
    if (n == 0) return;
    const uint64_t va = put_words(words, n);
    r = send({{0, va, n * 4, KGSL_CMDLIST_IB, 0}});
  }
  if (r < 0) drv_.fail("IOCTL_KGSL_GPU_COMMAND", r);  // after unlocking: the report reads the queue
}

void KgslQueue::submit_indirect(uint64_t va, size_t ndwords, std::span<const uint32_t> before,
                                std::span<const uint32_t> after) {
  drv_.check_faults();
  int r = 0;
  {
    std::lock_guard lk(mu_);
    std::vector<CommandObject> ibs;
    auto ring = [&](std::span<const uint32_t> w) {
      ibs.push_back({0, put_words(w.data(), w.size()), w.size() * 4, KGSL_CMDLIST_IB, 0});
    };
    if (!before.empty()) ring(before);
    ibs.push_back({0, va, ndwords * 4, KGSL_CMDLIST_IB, 0});
    if (!after.empty()) ring(after);
    r = send(std::move(ibs));
  }
  if (r < 0) drv_.fail("IOCTL_KGSL_GPU_COMMAND", r);
}

std::string KgslQueue::report() {
  std::unique_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return drv_.properties().name + ": compute queue: (busy submitting)";
  CmdstreamReadtimestampCtxtid t{drv_.context(), KGSL_TIMESTAMP_RETIRED, 0};
  if (drv_.ioctl(IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID, &t) == 0) retire(t.timestamp);
  if (inflight_.empty()) return "";
  std::string out = drv_.properties().name + ": compute queue (KGSL context " +
                    std::to_string(drv_.context()) + "): retired timestamp " +
                    std::to_string(t.timestamp) + ", submissions after it:";
  bool first = true;
  for (const Submitted& s : inflight_) {
    out += "\n  " + std::string(first ? "HERE > " : "pending") + " timestamp " +
           std::to_string(s.timestamp);
    first = false;
    for (const CommandObject& ib : s.ibs) {
      out += "\n    IB " + hex(ib.gpuaddr) + ", " + std::to_string(ib.size / 4) + " dwords";
      const bool in_ring = ib.gpuaddr >= ring_.va && ib.gpuaddr + ib.size <= ring_.va + ring_.size;
      if (!in_ring) continue;  // a bound command buffer: its capture shows it
      auto* w = reinterpret_cast<const uint32_t*>(ib.gpuaddr);
      for (auto& p : decode_cp({w, size_t(ib.size / 4)}, drv_.gen())) out += "\n      " + to_text(p);
    }
  }
  return out;
}

// ---- programs -------------------------------------------------------------------------

class AdrenoProgramImage final : public ProgramImage {
 public:
  AdrenoProgramImage(Device& dev, Gen gen, std::span<const std::byte> file) {
    Ir3Module m = parse_ir3(file);
    if (m.family && m.family != uint32_t(gen))
      throw InvalidInput(dev.name() + ": ir3 container is built for a" + std::to_string(m.family) +
                         "xx, the device is a" + std::to_string(int(gen)) + "xx");
    uint64_t total = 0;
    const auto places = place_ir3(m, file.size(), total);
    std::vector<std::byte> image(total);
    std::memcpy(image.data(), kLoadedMagic, 8);
    const uint64_t file_bytes = file.size();
    std::memcpy(image.data() + 8, &file_bytes, 8);
    std::memcpy(image.data() + kLoadedHeaderBytes, file.data(), file.size());
    for (size_t i = 0; i < m.kernels.size(); i++) {
      const Ir3Kernel& k = m.kernels[i];
      std::memcpy(image.data() + places[i].code, k.instructions.data(), k.instructions.size() * 4);
      if (!k.immediates.empty())
        std::memcpy(image.data() + places[i].immediates, k.immediates.data(), k.immediates.size() * 4);
    }
    memory_ = dev.allocate(total, MemoryKind::Device, true);
    std::memcpy(memory_.host(), image.data(), image.size());
    for (size_t i = 0; i < m.kernels.size(); i++) {
      const Ir3Kernel& k = m.kernels[i];
      if (k.local_memory_bytes || k.private_memory_bytes || k.uav_count ||
          k.workgroup_id_regid != kIr3NoRegid || k.local_id_regid != kIr3NoRegid) {
        unsupported_[k.name] = "needs local or private memory, UAVs or workgroup/local ids";
        continue;
      }
      auto obj = std::make_shared<AdrenoKernel>();
      obj->name = k.name;
      obj->code_va = memory_.va() + places[i].code;
      obj->instr_dwords = k.instructions.size();
      obj->full_regs = k.full_regs;
      obj->half_regs = k.half_regs;
      obj->branch_stack = k.branch_stack;
      obj->threadsize = k.threadsize;
      obj->const_dwords = k.const_dwords;
      obj->args_offset = k.args_offset;
      obj->args_bytes = k.args_bytes;
      obj->uav_count = k.uav_count;
      if (!k.immediates.empty()) {
        obj->immediates_va = memory_.va() + places[i].immediates;
        obj->immediates_offset = k.immediates_offset;
        obj->immediates_dwords = uint32_t(k.immediates.size());
      }
      CpEncoder(gen, {}).prepare(*obj);
      obj->kernarg_size = std::max<uint32_t>(k.args_bytes, 16);
      obj->kernarg_align = 16;
      for (const Ir3Arg& a : k.args)
        obj->args.push_back({a.name, a.offset, a.size, a.kind, a.access});
      kernels_[k.name] = std::move(obj);
    }
  }
  std::shared_ptr<const KernelObject> kernel(const std::string& name) const override {
    auto it = kernels_.find(name);
    if (it != kernels_.end()) return it->second;
    auto u = unsupported_.find(name);
    if (u != unsupported_.end())
      throw InvalidInput("kernel '" + name + "' " + u->second +
                         ", which hcq's Adreno launches do not provide yet");
    return nullptr;
  }
  std::vector<std::string> kernel_names() const override {
    std::vector<std::string> n;
    for (auto& [k, _] : kernels_) n.push_back(k);
    return n;
  }

 private:
  Buffer memory_;
  std::map<std::string, std::shared_ptr<AdrenoKernel>> kernels_;
  std::map<std::string, std::string> unsupported_;
};

std::unique_ptr<ProgramImage> KgslDriver::load_program(Device& dev, std::span<const std::byte> image) {
  return std::make_unique<AdrenoProgramImage>(dev, gen_, image);
}

}  // namespace

std::unique_ptr<DeviceDriver> open_kgsl_device(std::shared_ptr<os::Kernel> kernel,
                                               const std::string& device_name) {
  return std::make_unique<KgslDriver>(std::move(kernel), device_name);
}

std::vector<std::string> kgsl_gpus(os::Kernel& kernel) {
  int fd = kernel.open(kNode, O_RDWR | O_CLOEXEC);
  if (fd < 0) return {};
  DevInfo info{};
  DeviceGetProperty prop{};
  prop.type = KGSL_PROP_DEVICE_INFO;
  prop.value = reinterpret_cast<uint64_t>(&info);
  prop.sizebytes = sizeof(info);
  std::vector<std::string> out;
  if (kernel.ioctl(fd, IOCTL_KGSL_DEVICE_GETPROPERTY, &prop) == 0)
    out.push_back("Adreno " + chip_name(info.chip_id) + " (KGSL)");
  kernel.close(fd);
  return out;
}

}  // namespace hcq::qcom
