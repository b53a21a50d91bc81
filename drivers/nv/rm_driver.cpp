#include "nv/rm_driver.hpp"

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "nv/cubin.hpp"
#include "nv/emu/rm.hpp"
#include "nv/encoders.hpp"
#include "nv/rm_abi.hpp"
#include "nv/targets.hpp"

namespace hcq::nv {
namespace {

using namespace rm;

constexpr uint64_t kPage = 4096;
// One host address range serves as GPU virtual addresses (CPU and GPU see buffers at the same
// address). Its first part holds the driver's own objects (GPFIFO rings, push buffers,
// notifiers, channel ranges UVM keeps for RM); lib/core's heap hands out the rest.
constexpr uint64_t kPrivateVa = 4ull << 30;
constexpr uint64_t kHeapVa = 256ull << 30;
constexpr uint32_t kGpfifoEntries = 1024;
constexpr uint64_t kGpfifoVaLimit = 1ull << 40;  // push buffers must lie below (40-bit entries)
constexpr uint64_t kPushBytes = 1 << 20;
// UVM reserves this much VA per channel for RM's own use (tinygrad ops_nv.py).
constexpr uint64_t kChannelVaBytes = 0x4000000;
// Where the shared and local memory windows sit in every kernel's address space: 4 GiB
// aligned and far above the driver's range (tinygrad ops_nv.py's addresses). Hopper refuses a
// shared window at 0xfe000000 (seen on an H200, RM 580.159: Xid 69, class error on
// SET_SHADER_SHARED_MEMORY_WINDOW_B with that value). Host memory mapped for the GPU at its
// own address must stay out of both windows.
constexpr uint64_t kSharedWindow = 0x729400000000, kLocalWindow = 0x729300000000;
constexpr uint64_t kWindowBytes = 4ull << 30;
// NVOS33 flags tinygrad maps the usermode page with.
constexpr uint32_t kUsermodeMapFlags = 2;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string status_text(NvStatus s) {
  const char* n = status_name(s);
  return n ? std::string(n) : "NV_STATUS " + hex(s);
}


class RmDriver;

// GPFIFO entry LENGTH is 21 bits of dwords (NVIDIA open-gpu-doc clc36f.h NVC36F_GP_ENTRY1_LENGTH
// 30:10): the largest command buffer one entry runs.
constexpr size_t kMaxEntryDwords = (1u << 21) - 1;

// A GPFIFO channel: the ring of entries, USERD, a push buffer ring for direct submissions,
// the error notifier, and the doorbell.
class Channel final : public HwQueue {
 public:
  Channel(RmDriver& drv, QueueKind kind, uint32_t index);
  ~Channel() override;
  void submit(const uint32_t* words, size_t n) override;
  // Through RmDriver::submit_indirect, as one of several channels.
  void submit_indirect(uint64_t va, size_t ndwords) override;
  size_t max_indirect_dwords() const override { return kMaxEntryDwords; }
  // RmDriver::submit_indirect's steps: an entry (of a size check_entry() allowed) and
  // GP_PUT, with faults checked by the caller; then, after one ordering read on the BAR1
  // path, the doorbell.
  void check_entry(size_t ndwords) const;
  void stage_indirect(uint64_t va, size_t ndwords);
  void ring_doorbell();
  // Read GP_PUT back through BAR1: no write on that path before it is still on its way.
  void order_writes() const { (void)__atomic_load_n(&userd_->GPPut, __ATOMIC_ACQUIRE); }
  // The channel's error notifier: nonzero status once RM (or the emulator) stopped it.
  const Notification& notifier() const { return *static_cast<const Notification*>(notifier_.host); }
  std::string report();
  const std::string& name() const { return name_; }

 private:
  struct Segment {
    uint64_t seq;           // GPFIFO entry number (monotonic)
    uint64_t va;
    uint32_t dwords;
    uint64_t push_end = 0;  // push-buffer ring position it frees when done (0: not in it)
  };
  uint32_t gp_get() const { return __atomic_load_n(&userd_->GPGet, __ATOMIC_ACQUIRE); }
  uint64_t completed();  // reads GP_GET: through BAR1 on a real GPU, about a microsecond
  void retire();
  uint64_t push_words(const uint32_t* w, size_t n);  // into the push ring: its GPU address
  void add_entry(uint64_t va, uint32_t dwords, uint64_t push_end);
  void put_gp_put();  // publish the entries written (GP_PUT), ordered after them
  void kick();

  RmDriver& drv_;
  std::string name_;
  NvHandle handle_ = 0;
  uint32_t token_ = 0;
  Allocation ring_, push_, notifier_;
  uint64_t* gpfifo_ = nullptr;
  Userd* userd_ = nullptr;
  void* channel_va_ = nullptr;  // UVM_REGISTER_CHANNEL's range
  uint64_t put_seq_ = 0;      // GPFIFO entries written
  uint64_t done_seen_ = 0;    // entries completed as retire() last read them
  uint64_t push_put_ = 0, push_done_ = 0;  // push ring bytes, monotonic
  std::deque<Segment> inflight_;
  // The last entries the GPU finished: a channel error found after GP_GET passed the bad
  // entry (RM stops the channel once it reads on) is reported from these.
  std::deque<Segment> retired_;
  std::mutex mu_;
};

class RmDriver final : public DeviceDriver {
 public:
  RmDriver(std::shared_ptr<os::Kernel> kernel, int index, const std::string& name);
  ~RmDriver() override;

  const DeviceProperties& properties() const override { return props_; }
  uint64_t va_base() const override { return reserve_base_ + private_bytes_; }
  uint64_t va_size() const override { return heap_bytes_; }
  Allocation allocate(uint64_t va, uint64_t size, MemoryKind kind, bool executable) override;
  void free(const Allocation& a) override;
  Allocation map_user(void* host, uint64_t size) override;
  std::unique_ptr<HwQueue> create_queue(QueueKind kind) override;
  std::unique_ptr<Encoder> encoder(QueueKind kind) override;
  void submit_indirect(std::span<const IndirectRun> runs) override;
  std::unique_ptr<ProgramImage> load_program(Device& dev, std::span<const std::byte> image) override;
  void wait_interrupt(std::chrono::milliseconds timeout) override;
  void check_faults() override;
  std::string hang_report() override;

  // Driver-private memory, freed when the driver closes.
  Allocation private_alloc(uint64_t size, MemoryKind kind);
  uint64_t private_va(uint64_t size, uint64_t align);
  NvHandle alloc_object(NvHandle parent, uint32_t cls, void* params, uint32_t size,
                        const char* what);
  void free_object(NvHandle h);
  void control(NvHandle obj, uint32_t cmd, void* params, uint32_t size, const char* what);
  void uvm(unsigned long req, void* params, NvStatus* status, const char* what);
  // UVM_FREE and UVM_UNREGISTER_CHANNEL, whose layouts changed in 590.
  void uvm_free(uint64_t va, uint64_t length);
  void uvm_unregister_channel(NvHandle channel);
  void ring_doorbell(uint32_t token) {
    __atomic_store_n(doorbell_, token, __ATOMIC_RELEASE);
  }
  const ClassSet& classes() const { return classes_; }
  os::Kernel& kernel() { return *kernel_; }
  QmdVersion qmd_version() const { return qmd_; }
  Gen gen() const { return gen_; }
  NvHandle root() const { return root_; }
  NvHandle channel_group() const { return group_; }
  NvHandle ctxshare() const { return ctxshare_; }
  int ctl_fd() const { return ctl_; }
  const NvProcessorUuid& uuid() const { return uuid_; }
  void register_channel(Channel* c) {
    std::lock_guard lk(mu_);
    channels_.push_back(c);
  }
  void unregister_channel(Channel* c) {
    std::lock_guard lk(mu_);
    std::erase(channels_, c);
  }
  // The host view of [va, va+bytes) when the driver knows one (for hang reports).
  const void* host_view(uint64_t va, uint64_t bytes);

 private:
  Allocation alloc_at(uint64_t va, uint64_t size, MemoryKind kind);
  void map_for_cpu(NvHandle mem, uint64_t va, uint64_t size, bool system, uint32_t flags);
  void map_for_gpu(NvHandle mem, uint64_t va, uint64_t size);
  int open_gpu_fd();
  void reserve(uint64_t va, uint64_t size);
  uint32_t enabled_sms(uint32_t sm_per_tpc, uint32_t die_sms);
  [[noreturn]] void raise_fault(const std::string& what);

  std::shared_ptr<os::Kernel> kernel_;
  DeviceProperties props_;
  unsigned rm_major_ = 0;  // the kernel module's version, which picks a few layouts
  int ctl_ = -1, uvm_ = -1, uvm2_ = -1, gpu_fd_ = -1;
  uint32_t minor_ = 0;
  NvHandle root_ = 0, device_ = 0, subdevice_ = 0, usermode_ = 0, vaspace_ = 0, group_ = 0,
           ctxshare_ = 0;
  NvHandle next_handle_ = 0xcaf00001;
  NvProcessorUuid uuid_{};
  ClassSet classes_;
  Gen gen_ = Gen::Hopper;
  QmdVersion qmd_ = QmdVersion::V03;
  volatile uint32_t* doorbell_ = nullptr;
  void* usermode_map_ = nullptr;
  uint64_t reserve_base_ = 0, reserve_size_ = 0, private_next_ = 0;
  uint64_t private_bytes_ = 0, heap_bytes_ = 0;  // the reservation: driver objects, then heap
  std::mutex mu_;  // private allocations, the allocation map, channels
  std::vector<Allocation> private_allocs_;
  std::map<uint64_t, Allocation> allocs_;  // by VA: what the driver knows to be CPU-visible
  std::vector<Channel*> channels_;
  StickyFault fault_;
};

// ---- driver ---------------------------------------------------------------------------

RmDriver::RmDriver(std::shared_ptr<os::Kernel> kernel, int index, const std::string& name)
    : kernel_(std::move(kernel)) {
  props_.name = name;
  ctl_ = kernel_->open("/dev/nvidiactl", O_RDWR | O_CLOEXEC);
  if (ctl_ < 0) throw OsError(name + ": open /dev/nvidiactl", -ctl_);

  // The RM interface version: ours must match the kernel module's.
  RmApiVersion v{};
  v.cmd = NV_RM_API_VERSION_CMD_QUERY;
  if (int r = kernel_->ioctl(ctl_, esc_for<RmApiVersion>(NV_ESC_CHECK_VERSION_STR), &v); r < 0)
    throw OsError(name + ": NV_ESC_CHECK_VERSION_STR", -r);
  v.versionString[sizeof(v.versionString) - 1] = 0;
  rm_major_ = driver_major(v.versionString);
  if (rm_major_ < kMinRmMajor || rm_major_ > kMaxRmMajor)
    throw Error(name + ": the NVIDIA kernel module's RM interface is version " +
                std::string(v.versionString) + "; hcq's structures are written for " + kRmVersion +
                " and match versions " + std::to_string(kMinRmMajor) + " to " +
                std::to_string(kMaxRmMajor) + ".x");

  Nvos21 client{};
  client.hClass = NV01_ROOT_CLIENT;
  if (int r = kernel_->ioctl(ctl_, esc_for<Nvos21>(NV_ESC_RM_ALLOC), &client); r < 0)
    throw OsError(name + ": NV_ESC_RM_ALLOC (root client)", -r);
  if (client.status != NV_OK)
    throw Error(name + ": allocating the RM root client: " + status_text(client.status));
  root_ = client.hObjectNew;

  uvm_ = kernel_->open("/dev/nvidia-uvm", O_RDWR | O_CLOEXEC);
  if (uvm_ < 0) throw OsError(name + ": open /dev/nvidia-uvm", -uvm_);
  UvmInitializeParams init{};
  uvm(UVM_INITIALIZE, &init, &init.rmStatus, "UVM_INITIALIZE");
  uvm2_ = kernel_->open("/dev/nvidia-uvm", O_RDWR | O_CLOEXEC);
  if (uvm2_ >= 0) {  // CUDA makes the same call and does not mind it failing (tinygrad)
    UvmMmInitializeParams mm{};
    mm.uvmFd = uvm_;
    kernel_->ioctl(uvm2_, UVM_MM_INITIALIZE, &mm);
  }

  CardInfo cards[32] = {};
  if (int r = kernel_->ioctl(ctl_, esc(NV_ESC_CARD_INFO, sizeof(cards)), cards); r < 0)
    throw OsError(name + ": NV_ESC_CARD_INFO", -r);
  int seen = 0;
  const CardInfo* card = nullptr;
  for (auto& c : cards)
    if (c.valid && seen++ == index) card = &c;
  if (!card)
    throw InvalidInput(name + ": no such NVIDIA GPU (RM reports " + std::to_string(seen) + ")");
  minor_ = card->minor_number;

  GpuGetIdInfoV2Params id{};
  id.gpuId = card->gpu_id;
  control(root_, NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, &id, sizeof(id), "GPU_GET_ID_INFO_V2");
  gpu_fd_ = open_gpu_fd();

  DeviceAllocParams dp{};
  dp.deviceId = id.deviceInstance;
  dp.hClientShare = root_;
  dp.vaMode = NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES;
  device_ = alloc_object(root_, NV01_DEVICE_0, &dp, sizeof(dp), "device");
  subdevice_ = alloc_object(device_, NV20_SUBDEVICE_0, nullptr, 0, "subdevice");

  ClassListV2Params cl{};
  control(device_, NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, &cl, sizeof(cl), "GPU_GET_CLASSLIST_V2");
  classes_ = pick_classes({cl.classList, std::min<size_t>(cl.numClasses, std::size(cl.classList))});
  if (!classes_.gpfifo || !classes_.compute || !classes_.copy || !classes_.usermode)
    throw Error(name + ": the GPU lists no GPFIFO, compute, copy or usermode class hcq speaks "
                "(it drives Ampere to Blackwell)");
  gen_ = gen_of_compute_class(classes_.compute);
  qmd_ = qmd_version_for(gen_);

  usermode_ = alloc_object(subdevice_, classes_.usermode, nullptr, 0, "usermode");
  {
    int fd = open_gpu_fd();
    Nvos33WithFd m{};
    m.params = {root_, device_, usermode_, 0, kUsermodeMapBytes, 0, 0, kUsermodeMapFlags};
    m.fd = fd;
    int r = kernel_->ioctl(ctl_, esc_for<Nvos33WithFd>(NV_ESC_RM_MAP_MEMORY), &m);
    if (r < 0 || m.params.status != NV_OK) {
      kernel_->close(fd);
      throw Error(name + ": mapping the usermode doorbell page: " +
                  (r < 0 ? std::string(std::strerror(-r)) : status_text(m.params.status)));
    }
    usermode_map_ = kernel_->mmap(nullptr, kUsermodeMapBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                                  fd, 0);
    kernel_->close(fd);
    if (usermode_map_ == MAP_FAILED) throw OsError(name + ": mmap of the usermode page", errno);
    doorbell_ = static_cast<volatile uint32_t*>(usermode_map_) + NVC361_NOTIFY_CHANNEL_PENDING / 4;
  }

  VaspaceAllocParams vp{};
  vp.vaBase = 0x1000;
  vp.vaSize = 0x1fffffb000000;
  vp.flags = NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING |
             NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED;
  vaspace_ = alloc_object(device_, FERMI_VASPACE_A, &vp, sizeof(vp), "VA space");

  GpuGetGidInfoParams gid{};
  gid.flags = NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY;
  gid.length = 16;
  control(subdevice_, NV2080_CTRL_CMD_GPU_GET_GID_INFO, &gid, sizeof(gid), "GPU_GET_GID_INFO");
  std::memcpy(uuid_.uuid, gid.data, 16);
  UvmRegisterGpuParams rg{};
  rg.gpu_uuid = uuid_;
  rg.rmCtrlFd = -1;
  uvm(UVM_REGISTER_GPU, &rg, &rg.rmStatus, "UVM_REGISTER_GPU");
  UvmRegisterGpuVaspaceParams rv{};
  rv.gpuUuid = uuid_;
  rv.rmCtrlFd = ctl_;
  rv.hClient = root_;
  rv.hVaSpace = vaspace_;
  uvm(UVM_REGISTER_GPU_VASPACE, &rv, &rv.rmStatus, "UVM_REGISTER_GPU_VASPACE");

  // What the GPU is.
  // The name string lost its unicode alternative in 595 (132 bytes before, 68 after).
  auto name_of = [&]<class P>(P& p, uint8_t(&ascii)[NV2080_GPU_MAX_NAME_STRING_LENGTH]) {
    p.gpuNameStringFlags = NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_ASCII;
    control(subdevice_, NV2080_CTRL_CMD_GPU_GET_NAME_STRING, &p, sizeof(p), "GET_NAME_STRING");
    ascii[sizeof(ascii) - 1] = 0;
    return std::string(reinterpret_cast<const char*>(ascii));
  };
  std::string gpu_name;
  if (rm_major_ >= kMajorNameStringAsciiOnly) {
    GpuGetNameStringParams p{};
    gpu_name = name_of(p, p.ascii);
  } else {
    GpuGetNameStringParamsV590 p{};
    gpu_name = name_of(p, p.gpuNameString.ascii);
  }
  GrInfo gr[4] = {{NV2080_CTRL_GR_INFO_INDEX_SM_VERSION, 0},
                  {NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, 0},
                  {NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC, 0},
                  {NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC, 0}};
  GrGetInfoParams gi{};
  gi.grInfoListSize = 4;
  gi.grInfoList = reinterpret_cast<uint64_t>(gr);
  control(subdevice_, NV2080_CTRL_CMD_GR_GET_INFO, &gi, sizeof(gi), "GR_GET_INFO");
  FbGetInfoV2Params fb{};
  fb.fbInfoListSize = 1;
  fb.fbInfoList[0].index = NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE;
  control(subdevice_, NV2080_CTRL_CMD_FB_GET_INFO_V2, &fb, sizeof(fb), "FB_GET_INFO_V2");
  const uint32_t smv = gr[0].data;  // 0x900: major in 15:8, minor in 7:0
  const uint32_t sm = ((smv >> 8) & 0xff) * 10 + (smv & 0xff);

  ChannelGroupAllocParams gp{};
  gp.engineType = NV2080_ENGINE_TYPE_GRAPHICS;
  group_ = alloc_object(device_, KEPLER_CHANNEL_GROUP_A, &gp, sizeof(gp), "channel group");
  CtxshareAllocParams cs{};
  cs.hVASpace = vaspace_;
  cs.flags = NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC;
  ctxshare_ = alloc_object(group_, FERMI_CONTEXT_SHARE_A, &cs, sizeof(cs), "context share");

  // One host range serves as GPU addresses too. It lies below 1 TiB: GPFIFO entries carry
  // 40-bit push buffer addresses (clc56f.h GP_ENTRY1_GET_HI is 8 bits), and command buffers
  // may be anywhere in it (tinygrad keeps its command memory low for the same reason). Where
  // that much low address space is taken (AddressSanitizer's shadow covers 2 GiB to 2 TiB),
  // a small range below 2 GiB does.
  struct Layout {
    uint64_t first_hint, limit, step, private_bytes, heap_bytes;
  };
  const Layout layouts[] = {{64ull << 30, kGpfifoVaLimit, 64ull << 30, kPrivateVa, kHeapVa},
                            {256ull << 20, 2ull << 30, 128ull << 20, 64ull << 20, 768ull << 20}};
  void* base = MAP_FAILED;
  for (const Layout& l : layouts) {
    reserve_size_ = l.private_bytes + l.heap_bytes;
    for (uint64_t hint = l.first_hint; hint + reserve_size_ <= l.limit && base == MAP_FAILED;
         hint += l.step) {
      base = kernel_->mmap(reinterpret_cast<void*>(hint), reserve_size_, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
                           0);
      if (base != MAP_FAILED && base != reinterpret_cast<void*>(hint)) {  // before Linux 4.17
        kernel_->munmap(base, reserve_size_);
        base = MAP_FAILED;
      }
    }
    if (base != MAP_FAILED) {
      private_bytes_ = l.private_bytes;
      heap_bytes_ = l.heap_bytes;
      break;
    }
  }
  if (base == MAP_FAILED)
    throw OsError(name + ": reserving address space below 1 TiB for the GPU", errno);
  reserve_base_ = reinterpret_cast<uint64_t>(base);
  private_next_ = reserve_base_;

  props_.vendor = "NVIDIA";
  props_.arch = "sm_" + std::to_string(sm);
  props_.emulated = kernel_->emulated();
  props_.description = gpu_name + " (" + props_.arch + ", RM " + v.versionString + ")";
  props_.timestamp_hz = 1'000'000'000;  // the GPU timer counts nanoseconds
  props_.compute_units = enabled_sms(gr[3].data, gr[1].data * gr[2].data * gr[3].data);
  props_.wave_size = 32;
  props_.device_memory_bytes = uint64_t(fb.fbInfoList[0].data) << 10;
  props_.caps = Capabilities{};
}

RmDriver::~RmDriver() {
  for (auto& a : private_allocs_) free(a);
  if (group_) free_object(group_);
  if (root_) free_object(root_);
  if (usermode_map_ && usermode_map_ != MAP_FAILED) kernel_->munmap(usermode_map_, kUsermodeMapBytes);
  if (reserve_base_) kernel_->munmap(reinterpret_cast<void*>(reserve_base_), reserve_size_);
  for (int fd : {gpu_fd_, uvm2_, uvm_, ctl_})
    if (fd >= 0) kernel_->close(fd);
}

// The SMs the GPU runs: enabled TPCs over the enabled GPCs, times SMs per TPC (an H200's
// die has 144, it runs 132). Where RM refuses the masks, the die's count.
uint32_t RmDriver::enabled_sms(uint32_t sm_per_tpc, uint32_t die_sms) {
  try {
    GrGetGpcMaskParams g{};
    control(subdevice_, NV2080_CTRL_CMD_GR_GET_GPC_MASK, &g, sizeof(g), "GR_GET_GPC_MASK");
    uint32_t tpcs = 0;
    for (uint32_t gpc = 0; gpc < 32; gpc++) {
      if (!(g.gpcMask >> gpc & 1)) continue;
      GrGetTpcMaskParams t{};
      t.gpcId = gpc;
      control(subdevice_, NV2080_CTRL_CMD_GR_GET_TPC_MASK, &t, sizeof(t), "GR_GET_TPC_MASK");
      tpcs += uint32_t(std::popcount(t.tpcMask));
    }
    return tpcs ? tpcs * sm_per_tpc : die_sms;
  } catch (const Error&) {
    return die_sms;
  }
}

int RmDriver::open_gpu_fd() {
  const std::string path = "/dev/nvidia" + std::to_string(minor_);
  int fd = kernel_->open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) throw OsError(props_.name + ": open " + path, -fd);
  RegisterFd r{ctl_};
  if (int e = kernel_->ioctl(fd, esc_for<RegisterFd>(NV_ESC_REGISTER_FD), &r); e < 0) {
    kernel_->close(fd);
    throw OsError(props_.name + ": NV_ESC_REGISTER_FD on " + path, -e);
  }
  return fd;
}

NvHandle RmDriver::alloc_object(NvHandle parent, uint32_t cls, void* params, uint32_t size,
                                const char* what) {
  Nvos21 a{};
  a.hRoot = root_;
  a.hObjectParent = parent;
  {
    std::lock_guard lk(mu_);
    a.hObjectNew = next_handle_++;
  }
  a.hClass = cls;
  a.pAllocParms = reinterpret_cast<uint64_t>(params);
  a.paramsSize = size;
  if (int r = kernel_->ioctl(ctl_, esc_for<Nvos21>(NV_ESC_RM_ALLOC), &a); r < 0)
    throw OsError(props_.name + ": NV_ESC_RM_ALLOC (" + what + ", class " + hex(cls) + ")", -r);
  if (a.status != NV_OK)
    throw Error(props_.name + ": allocating the " + what + " (class " + hex(cls) + "): " +
                status_text(a.status));
  return a.hObjectNew;
}

void RmDriver::free_object(NvHandle h) {
  Nvos00 f{root_, 0, h, 0};
  kernel_->ioctl(ctl_, esc_for<Nvos00>(NV_ESC_RM_FREE), &f);
}

void RmDriver::control(NvHandle obj, uint32_t cmd, void* params, uint32_t size, const char* what) {
  Nvos54 c{};
  c.hClient = root_;
  c.hObject = obj;
  c.cmd = cmd;
  c.params = reinterpret_cast<uint64_t>(params);
  c.paramsSize = size;
  if (int r = kernel_->ioctl(ctl_, esc_for<Nvos54>(NV_ESC_RM_CONTROL), &c); r < 0)
    throw OsError(props_.name + ": NV_ESC_RM_CONTROL " + what, -r);
  if (c.status != NV_OK)
    throw Error(props_.name + ": RM control " + what + " (" + hex(cmd) + "): " +
                status_text(c.status));
}

void RmDriver::uvm(unsigned long req, void* params, NvStatus* status, const char* what) {
  if (int r = kernel_->ioctl(uvm_, req, params); r < 0)
    throw OsError(props_.name + ": " + what, -r);
  if (*status != NV_OK) throw Error(props_.name + ": " + what + ": " + status_text(*status));
}

void RmDriver::uvm_free(uint64_t va, uint64_t length) {
  if (rm_major_ >= kMajorUvmFreeNoLength) {
    UvmFreeParams f{va, 0};
    kernel_->ioctl(uvm_, UVM_FREE, &f);
  } else {
    // Before 590 the length must be the whole range's, or UVM keeps the range (and the next
    // mapping at that address fails with NV_ERR_UVM_ADDRESS_IN_USE, as on an H200 with 580).
    UvmFreeParamsV580 f{va, length, 0};
    kernel_->ioctl(uvm_, UVM_FREE, &f);
  }
}

void RmDriver::uvm_unregister_channel(NvHandle channel) {
  if (rm_major_ >= kMajorUvmFreeNoLength) {
    UvmUnregisterChannelParams u{root_, channel, 0};
    kernel_->ioctl(uvm_, UVM_UNREGISTER_CHANNEL, &u);
  } else {
    UvmUnregisterChannelParamsV580 u{uuid_, root_, channel, 0};
    kernel_->ioctl(uvm_, UVM_UNREGISTER_CHANNEL, &u);
  }
}

void RmDriver::reserve(uint64_t va, uint64_t size) {
  kernel_->mmap(reinterpret_cast<void*>(va), size, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

void RmDriver::map_for_cpu(NvHandle mem, uint64_t va, uint64_t size, bool system, uint32_t flags) {
  // System memory maps through nvidiactl, video memory through the GPU's node (tinygrad).
  int fd = system ? kernel_->open("/dev/nvidiactl", O_RDWR | O_CLOEXEC) : open_gpu_fd();
  if (fd < 0) throw OsError(props_.name + ": open /dev/nvidiactl", -fd);
  Nvos33WithFd m{};
  m.params = {root_, device_, mem, 0, size, 0, 0, flags};
  m.fd = fd;
  int r = kernel_->ioctl(ctl_, esc_for<Nvos33WithFd>(NV_ESC_RM_MAP_MEMORY), &m);
  void* p = MAP_FAILED;
  if (r == 0 && m.params.status == NV_OK)
    p = kernel_->mmap(reinterpret_cast<void*>(va), size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_FIXED, fd, 0);
  kernel_->close(fd);
  if (r < 0) throw OsError(props_.name + ": NV_ESC_RM_MAP_MEMORY", -r);
  if (m.params.status != NV_OK)
    throw Error(props_.name + ": NV_ESC_RM_MAP_MEMORY: " + status_text(m.params.status));
  if (p == MAP_FAILED) throw OsError(props_.name + ": mmap of RM memory at " + hex(va), errno);
}

void RmDriver::map_for_gpu(NvHandle mem, uint64_t va, uint64_t size) {
  UvmCreateExternalRangeParams range{};
  range.base = va;
  range.length = size;
  uvm(UVM_CREATE_EXTERNAL_RANGE, &range, &range.rmStatus, "UVM_CREATE_EXTERNAL_RANGE");
  auto m = std::make_unique<UvmMapExternalAllocationParams>();
  m->base = va;
  m->length = size;
  m->perGpuAttributes[0].gpuUuid = uuid_;
  m->perGpuAttributes[0].gpuMappingType = UvmGpuMappingTypeReadWriteAtomic;
  m->gpuAttributesCount = 1;
  m->rmCtrlFd = ctl_;
  m->hClient = root_;
  m->hMemory = mem;
  try {
    uvm(UVM_MAP_EXTERNAL_ALLOCATION, m.get(), &m->rmStatus,
        ("UVM_MAP_EXTERNAL_ALLOCATION at " + hex(va)).c_str());
  } catch (...) {
    uvm_free(va, size);
    throw;
  }
}

Allocation RmDriver::alloc_at(uint64_t va, uint64_t size, MemoryKind kind) {
  const bool system = kind == MemoryKind::Host;
  MemoryAllocParams p{};
  p.owner = root_;
  p.size = size;
  p.alignment = kPage;
  p.limit = size - 1;
  p.format = 6;  // pitch (tinygrad)
  p.flags = NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT | NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED |
            NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED;
  if (system) {
    p.type = NVOS32_TYPE_NOTIFIER;
    p.attr = NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS << NVOS32_ATTR_PHYSICALITY_SHIFT |
             NVOS32_ATTR_LOCATION_PCI << NVOS32_ATTR_LOCATION_SHIFT;
    p.attr2 = NVOS32_ATTR2_ZBC_PREFER_NO_ZBC << NVOS32_ATTR2_ZBC_SHIFT |
              NVOS32_ATTR2_GPU_CACHEABLE_NO << NVOS32_ATTR2_GPU_CACHEABLE_SHIFT;
  } else {
    p.type = NVOS32_TYPE_IMAGE;
    p.flags |= NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE | NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM;
    p.attr = NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS << NVOS32_ATTR_PHYSICALITY_SHIFT;
    p.attr2 = NVOS32_ATTR2_ZBC_PREFER_NO_ZBC << NVOS32_ATTR2_ZBC_SHIFT |
              NVOS32_ATTR2_GPU_CACHEABLE_YES << NVOS32_ATTR2_GPU_CACHEABLE_SHIFT;
  }
  const std::string what = std::to_string(size) + " bytes of " + to_string(kind) + " memory";
  NvHandle h;
  try {
    h = alloc_object(device_, system ? NV01_MEMORY_SYSTEM : NV01_MEMORY_LOCAL_USER, &p,
                     sizeof(p), what.c_str());
  } catch (const Error& e) {
    if (system || !std::string_view(e.what()).ends_with(status_text(NV_ERR_NO_MEMORY))) throw;
    // Out of video memory: say how much is left (FB_INFO_INDEX_HEAP_FREE, KiB).
    FbGetInfoV2Params fb{};
    fb.fbInfoListSize = 1;
    fb.fbInfoList[0].index = NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE;
    std::string free = "unknown";
    try {
      control(subdevice_, NV2080_CTRL_CMD_FB_GET_INFO_V2, &fb, sizeof(fb), "FB_GET_INFO_V2");
      free = std::to_string(uint64_t(fb.fbInfoList[0].data) << 10) + " bytes";
    } catch (const Error&) {
    }
    throw Error(std::string(e.what()) + "; free: " + free + " of " +
                std::to_string(props_.device_memory_bytes) + " bytes");
  }
  Allocation out{va, size, nullptr, kind, h};
  try {
    // CPU view at the GPU address; video memory beyond a small BAR may refuse (no CPU view).
    try {
      map_for_cpu(h, va, size, system, 0);
      out.host = reinterpret_cast<void*>(va);
    } catch (const Error&) {
      if (system) throw;
    }
    map_for_gpu(h, va, size);
  } catch (...) {
    if (out.host) reserve(va, size);
    free_object(h);
    throw;
  }
  std::lock_guard lk(mu_);
  allocs_[va] = out;
  return out;
}

Allocation RmDriver::allocate(uint64_t va, uint64_t size, MemoryKind kind, bool) {
  return alloc_at(va, align_up(size, kPage), kind);
}

Allocation RmDriver::map_user(void* host, uint64_t size) {
  const uint64_t va = reinterpret_cast<uint64_t>(host);
  for (uint64_t window : {kSharedWindow, kLocalWindow})
    if (va < window + kWindowBytes && window < va + size)
      throw InvalidInput(props_.name + ": host memory at " + hex(va) + " (" +
                         std::to_string(size) + " bytes) overlaps the GPU's " +
                         (window == kSharedWindow ? "shared" : "local") + " memory window at " +
                         hex(window) + "; it cannot be mapped at its own address");
  Nvos02WithFd m{};
  {
    std::lock_guard lk(mu_);
    m.params.hObjectNew = next_handle_++;
  }
  m.params.hRoot = root_;
  m.params.hObjectParent = device_;
  m.params.hClass = NV01_MEMORY_SYSTEM_OS_DESCRIPTOR;
  m.params.flags = NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS << NVOS02_FLAGS_PHYSICALITY_SHIFT |
                   NVOS02_FLAGS_COHERENCY_CACHED << NVOS02_FLAGS_COHERENCY_SHIFT |
                   NVOS02_FLAGS_MAPPING_NO_MAP << NVOS02_FLAGS_MAPPING_SHIFT;
  m.params.pMemory = va;
  m.params.limit = size - 1;
  m.fd = -1;
  if (int r = kernel_->ioctl(gpu_fd_, esc_for<Nvos02WithFd>(NV_ESC_RM_ALLOC_MEMORY), &m); r < 0)
    throw OsError(props_.name + ": NV_ESC_RM_ALLOC_MEMORY (host memory at " + hex(va) + ")", -r);
  if (m.params.status != NV_OK)
    throw Error(props_.name + ": describing host memory at " + hex(va) + " to RM: " +
                status_text(m.params.status));
  try {
    map_for_gpu(m.params.hObjectNew, va, size);
  } catch (...) {
    free_object(m.params.hObjectNew);
    throw;
  }
  Allocation out{va, size, host, MemoryKind::Host, m.params.hObjectNew};
  out.user = true;
  std::lock_guard lk(mu_);
  allocs_[va] = out;
  return out;
}

void RmDriver::free(const Allocation& a) {
  uvm_free(a.va, a.size);
  free_object(NvHandle(a.handle));
  if (!a.user) reserve(a.va, a.size);  // keep the range ours (drops any CPU mapping)
  std::lock_guard lk(mu_);
  allocs_.erase(a.va);
}

uint64_t RmDriver::private_va(uint64_t size, uint64_t align) {
  std::lock_guard lk(mu_);
  uint64_t va = align_up(private_next_, align);
  if (va + size > reserve_base_ + private_bytes_)
    throw Error(props_.name + ": driver-private GPU address space exhausted");
  private_next_ = va + size;
  return va;
}

Allocation RmDriver::private_alloc(uint64_t size, MemoryKind kind) {
  size = align_up(size, kPage);
  Allocation a = alloc_at(private_va(size, std::min<uint64_t>(size, 2 << 20)), size, kind);
  std::lock_guard lk(mu_);
  private_allocs_.push_back(a);
  return a;
}

const void* RmDriver::host_view(uint64_t va, uint64_t bytes) {
  std::lock_guard lk(mu_);
  auto it = allocs_.upper_bound(va);
  if (it == allocs_.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  if (!a.host || va - a.va >= a.size || bytes > a.size - (va - a.va)) return nullptr;
  return reinterpret_cast<const void*>(va);
}

std::unique_ptr<HwQueue> RmDriver::create_queue(QueueKind kind) {
  uint32_t index;
  {
    std::lock_guard lk(mu_);
    index = uint32_t(channels_.size());
  }
  return std::make_unique<Channel>(*this, kind, index);
}

void RmDriver::submit_indirect(std::span<const IndirectRun> runs) {
  if (runs.empty()) return;
  check_faults();  // once for all: it looks at every channel's error notifier
  // Every queue of this device is one of its channels. Every entry is checked before any is
  // written, so a refused run leaves nothing half submitted.
  for (const IndirectRun& r : runs) static_cast<Channel*>(r.queue)->check_entry(r.ndwords);
  for (const IndirectRun& r : runs) static_cast<Channel*>(r.queue)->stage_indirect(r.va, r.ndwords);
  // One read orders every GP_PUT and entry written above (all through BAR1) before the
  // doorbells; a channel another thread submits to in between is covered by its own read.
  static_cast<Channel*>(runs.back().queue)->order_writes();
  for (const IndirectRun& r : runs) static_cast<Channel*>(r.queue)->ring_doorbell();
}

std::unique_ptr<Encoder> RmDriver::encoder(QueueKind kind) {
  if (kind == QueueKind::Compute) return std::make_unique<ComputeEncoder>(qmd_);
  return std::make_unique<CopyEncoder>();
}

void RmDriver::check_faults() {
  if (!fault_.set()) {
    std::string what;
    {
      std::lock_guard lk(mu_);
      for (Channel* c : channels_) {
        const Notification& n = c->notifier();
        if (__atomic_load_n(&n.status, __ATOMIC_ACQUIRE) != 0) {
          const uint32_t rc = n.info32;
          const char* rc_name = rc_error_name(rc);
          what = c->name() + " stopped with channel error " + std::to_string(rc) + " (" +
                 (rc_name ? rc_name : "unknown") + ")";
          break;
        }
      }
    }
    if (what.empty()) return;
    raise_fault(what);
  }
  fault_.check();
}

[[noreturn]] void RmDriver::raise_fault(const std::string& what) {
  fault_.raise(
      [&] { return fault_message(*kernel_, emu::kEmulatorFaultLog, props_.name, what, hang_report()); });
}

std::string RmDriver::hang_report() {
  std::vector<Channel*> chans;
  {
    std::lock_guard lk(mu_);
    chans = channels_;
  }
  std::string out;
  for (Channel* c : chans) {
    std::string r = c->report();
    if (!r.empty()) out += (out.empty() ? "" : "\n") + r;
  }
  return out;
}

void RmDriver::wait_interrupt(std::chrono::milliseconds timeout) {
  // Completion interrupts reach user space only through RM OS events, which hcq does not use
  // yet: poll the semaphores a little later.
  check_faults();
  std::this_thread::sleep_for(std::min<std::chrono::microseconds>(timeout, std::chrono::microseconds(50)));
}

// ---- channels -------------------------------------------------------------------------

Channel::Channel(RmDriver& drv, QueueKind kind, uint32_t index) : drv_(drv) {
  // The GPFIFO ring and its USERD in one video-memory allocation (tinygrad's layout); the
  // push ring and the error notifier in system memory.
  const uint64_t ring_bytes = uint64_t(kGpfifoEntries) * 8;
  ring_ = drv.private_alloc(ring_bytes + kUserdBytes, MemoryKind::Device);
  if (!ring_.host)
    throw Error(drv.properties().name + ": the GPFIFO ring is not CPU-visible (BAR too small?)");
  push_ = drv.private_alloc(kPushBytes, MemoryKind::Host);
  notifier_ = drv.private_alloc(kPage, MemoryKind::Host);
  gpfifo_ = static_cast<uint64_t*>(ring_.host);
  userd_ = reinterpret_cast<Userd*>(static_cast<char*>(ring_.host) + ring_bytes);
  std::memset(userd_, 0, sizeof(Userd));

  ChannelAllocParams p{};
  p.hObjectError = NvHandle(notifier_.handle);
  p.hObjectBuffer = NvHandle(ring_.handle);
  p.gpFifoOffset = ring_.va;
  p.gpFifoEntries = kGpfifoEntries;
  p.hContextShare = drv.ctxshare();
  p.hUserdMemory[0] = NvHandle(ring_.handle);
  p.userdOffset[0] = ring_bytes;
  const char* what = kind == QueueKind::Compute ? "compute channel" : "copy channel";
  handle_ = drv.alloc_object(drv.channel_group(), drv.classes().gpfifo, &p, sizeof(p), what);
  const uint32_t engine_class = kind == QueueKind::Compute ? drv.classes().compute : drv.classes().copy;
  drv.alloc_object(handle_, engine_class, nullptr, 0, what);
  WorkSubmitTokenParams t{~0u};
  drv.control(handle_, NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, &t, sizeof(t),
              "GPFIFO_GET_WORK_SUBMIT_TOKEN");
  token_ = t.workSubmitToken;
  UvmRegisterChannelParams rc{};
  rc.gpuUuid = drv.uuid();
  rc.rmCtrlFd = drv.ctl_fd();
  rc.hClient = drv.root();
  rc.hChannel = handle_;
  // Address space UVM keeps for RM's use of this channel: anywhere, but ours alone.
  void* range = drv.kernel().mmap(nullptr, kChannelVaBytes, PROT_NONE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) throw OsError(drv.properties().name + ": channel address space", errno);
  channel_va_ = range;
  rc.base = reinterpret_cast<uint64_t>(range);
  rc.length = kChannelVaBytes;
  drv.uvm(UVM_REGISTER_CHANNEL, &rc, &rc.rmStatus, "UVM_REGISTER_CHANNEL");
  GpfifoScheduleParams s{};
  s.bEnable = 1;
  drv.control(drv.channel_group(), NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, &s, sizeof(s), "GPFIFO_SCHEDULE");
  name_ = std::string(to_string(kind)) + " channel " + std::to_string(index);
  drv.register_channel(this);
  // Bind the engine class and set up the channel before any user work.
  auto setup = kind == QueueKind::Compute
                   ? ComputeEncoder::setup(drv.classes().compute, kSharedWindow, kLocalWindow)
                   : CopyEncoder::setup(drv.classes().copy);
  submit(setup.data(), setup.size());
}

Channel::~Channel() {
  drv_.unregister_channel(this);
  drv_.uvm_unregister_channel(handle_);
  drv_.free_object(handle_);
  if (channel_va_) drv_.kernel().munmap(channel_va_, kChannelVaBytes);
}

uint64_t Channel::completed() {
  const uint64_t put = put_seq_ % kGpfifoEntries;
  const uint64_t get = gp_get() % kGpfifoEntries;
  return put_seq_ - (put + kGpfifoEntries - get) % kGpfifoEntries;
}

void Channel::retire() {
  const uint64_t done = done_seen_ = completed();
  constexpr size_t kRetiredKept = 3;
  while (!inflight_.empty() && inflight_.front().seq < done) {
    if (inflight_.front().push_end) push_done_ = inflight_.front().push_end;
    retired_.push_back(inflight_.front());
    if (retired_.size() > kRetiredKept) retired_.pop_front();
    inflight_.pop_front();
  }
}

uint64_t Channel::push_words(const uint32_t* w, size_t n) {
  const uint64_t bytes = n * 4;
  if (bytes > kPushBytes / 2)
    throw InvalidInput(drv_.properties().name + ": " + name_ + ": a submission of " +
                       std::to_string(bytes) + " bytes does not fit the push buffer (" +
                       std::to_string(kPushBytes / 2) + " at most); bind it instead");
  uint64_t pos = push_put_ % kPushBytes;
  const uint64_t pad = pos + bytes > kPushBytes ? kPushBytes - pos : 0;
  auto start = std::chrono::steady_clock::now();
  // Room is judged from what retire() last read; GP_GET is read again only when that says
  // the push ring or the GPFIFO may be full (a read of it is a round trip over PCIe).
  while (push_put_ + pad + bytes - push_done_ > kPushBytes ||
         put_seq_ - done_seen_ + 3 >= kGpfifoEntries) {
    retire();
    if (push_put_ + pad + bytes - push_done_ <= kPushBytes &&
        put_seq_ - done_seen_ + 3 < kGpfifoEntries)
      break;
    drv_.check_faults();
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
      throw TimeoutError(drv_.properties().name + ": " + name_ +
                         ": push buffer or GPFIFO full for 10 s (GP_GET " +
                         std::to_string(gp_get()) + ", GP_PUT " +
                         std::to_string(put_seq_ % kGpfifoEntries) + ")");
    __builtin_ia32_pause();
  }
  push_put_ += pad;
  pos = push_put_ % kPushBytes;
  if (bytes) std::memcpy(static_cast<char*>(push_.host) + pos, w, bytes);
  push_put_ += bytes;
  return push_.va + pos;
}

void Channel::add_entry(uint64_t va, uint32_t dwords, uint64_t push_end) {
  // Level SUBROUTINE, as tinygrad writes its entries.
  gpfifo_[put_seq_ % kGpfifoEntries] = encode_gpfifo({va, dwords, true, false});
  inflight_.push_back({put_seq_, va, dwords, push_end});
  put_seq_++;
}

void Channel::put_gp_put() {
  // Entries, then GP_PUT, must be visible before the doorbell.
  __atomic_store_n(&userd_->GPPut, uint32_t(put_seq_ % kGpfifoEntries), __ATOMIC_RELEASE);
#if defined(__x86_64__)
  __builtin_ia32_sfence();
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

void Channel::ring_doorbell() { drv_.ring_doorbell(token_); }

void Channel::kick() {
  put_gp_put();
  // USERD and the ring are video memory written through BAR1, the doorbell a register in
  // another BAR: writes on two paths may land in either order, and a doorbell ahead of its
  // GP_PUT wakes an engine that finds nothing and sleeps on. A read on the BAR1 path cannot
  // pass the writes before it (nouveau reads its channel control page back the same way).
  order_writes();
  ring_doorbell();
}

void Channel::submit(const uint32_t* words, size_t n) {
  drv_.check_faults();
  std::lock_guard lk(mu_);
  if (n == 0) return;
  const uint64_t va = push_words(words, n);
  add_entry(va, uint32_t(n), push_put_);
  kick();
}

void Channel::submit_indirect(uint64_t va, size_t ndwords) {
  const IndirectRun run{this, va, ndwords};
  drv_.submit_indirect({&run, 1});
}

void Channel::check_entry(size_t ndwords) const {
  if (ndwords > kMaxEntryDwords)
    throw InvalidInput(name_ + ": a command buffer of " + std::to_string(ndwords) +
                       " dwords exceeds one GPFIFO entry (" + std::to_string(kMaxEntryDwords) + ")");
}

void Channel::stage_indirect(uint64_t va, size_t ndwords) {
  std::lock_guard lk(mu_);
  push_words(nullptr, 0);  // waits for GPFIFO room
  add_entry(va, uint32_t(ndwords), 0);  // the command buffer runs where it lives
  put_gp_put();
}

std::string Channel::report() {
  // A fault found while this channel waits for ring space reports from inside submit().
  std::unique_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return drv_.properties().name + ": " + name_ + ": (busy submitting)";
  retire();
  // GP_GET counts entries the GPU fetched, not finished: a real GPU fetches past a semaphore
  // acquire it then waits on, so with nothing left to fetch the last entries fetched are
  // shown too (where a stopped channel stopped, or where a waiting one may wait).
  const bool stopped = __atomic_load_n(&notifier().status, __ATOMIC_ACQUIRE) != 0;
  const bool all_fetched = inflight_.empty();
  if (all_fetched && retired_.empty()) return "";
  const uint32_t get = gp_get();
  std::string out = drv_.properties().name + ": " + name_ + ": GP_GET " + std::to_string(get) +
                    ", GP_PUT " + std::to_string(put_seq_ % kGpfifoEntries) +
                    (stopped       ? "; push buffer segments, the last ones done first:"
                     : all_fetched ? "; all fetched, the last (the engine may be on it):"
                                   : "; push buffer segments from GP_GET:");
  SubchannelMap subs = kDefaultSubchannels;
  std::vector<std::pair<const Segment*, const char*>> shown;
  if (stopped)
    for (const Segment& s : retired_) shown.push_back({&s, "done   "});
  else if (all_fetched)  // the one the engine may be on (an idle channel's last, too)
    shown.push_back({&retired_.back(), "fetched"});
  for (const Segment& s : inflight_)
    shown.push_back({&s, &s == &inflight_.front() ? "HERE > " : "pending"});
  for (auto [seg, mark] : shown) {
    const Segment& s = *seg;
    out += "\n  " + std::string(mark) + " entry " + std::to_string(s.seq % kGpfifoEntries) +
           ": " + hex(s.va) + ", " + std::to_string(s.dwords) + " dwords";
    const void* w = drv_.host_view(s.va, uint64_t(s.dwords) * 4);
    if (!w) continue;
    for (auto& p : decode_push({static_cast<const uint32_t*>(w), s.dwords}, drv_.gen(), subs))
      out += "\n            " + to_text(p);
  }
  return out;
}

// ---- programs -------------------------------------------------------------------------

class NvProgramImage final : public KernelTable<NvKernel> {
 public:
  NvProgramImage(Device& dev, RmDriver& drv, std::span<const std::byte> file)
      : KernelTable("NVIDIA") {
    Cubin c = parse_cubin(file);
    const auto& arch = dev.properties().arch;
    const std::string built = "sm_" + std::to_string(c.sm);
    if (built != arch)
      throw InvalidInput(dev.name() + ": cubin is built for " + built + ", the device is " + arch);
    // The whole file is loaded as-is (the emulated GPU, like a debugger, finds kernels by
    // parsing the ELF at the start of the mapping), then relocated in place.
    memory_ = dev.allocate(std::max<uint64_t>(c.image_bytes, 1), MemoryKind::Device, true);
    if (memory_.va() % std::max<uint64_t>(c.base_alignment, 256))
      throw Error(dev.name() + ": code memory at " + hex(memory_.va()) + " is not aligned to " +
                  std::to_string(c.base_alignment));
    std::vector<std::byte> laid(c.image_bytes);
    std::copy(file.begin(), file.end(), laid.begin());
    apply_relocations(c, laid, memory_.va());
    if (memory_.host())
      std::memcpy(memory_.host(), laid.data(), laid.size());
    else
      dev.copy_in(memory_, 0, laid.data(), laid.size());
    dev.synchronize();
    const ComputeEncoder enc(drv.qmd_version());
    const auto driver_words = cbuf0_driver_words(drv.gen(), kSharedWindow, kLocalWindow);
    for (const CubinKernel& k : c.kernels) {
      if (k.local_bytes) {
        unsupported_[k.name] = "needs " + std::to_string(k.local_bytes) +
                               " bytes of local memory per thread";
        continue;
      }
      auto obj = std::make_shared<NvKernel>();
      obj->name = k.name;
      obj->code_va = memory_.va() + k.code_offset;
      obj->code_bytes = k.code_size;
      obj->sm = c.sm;
      obj->registers = k.registers;
      obj->barriers = k.barriers;
      obj->shared_bytes = k.shared_bytes;
      obj->lds_bytes = k.shared_bytes;
      obj->param_base = k.param_base;
      obj->cbuf0_bytes = uint32_t(align_up(std::max<uint64_t>(k.param_base + k.param_bytes,
                                                               driver_words.size()), 16));
      const uint32_t cbuf = cbuf0_offset(drv.qmd_version());
      obj->kernarg_size = cbuf + obj->cbuf0_bytes;
      obj->kernarg_align = 256;  // the QMD is sent as its address >> 8
      obj->kernarg_init.assign(cbuf, std::byte{0});
      obj->kernarg_init.insert(obj->kernarg_init.end(), driver_words.begin(), driver_words.end());
      for (const CubinParam& p : k.params) {
        KernelArg a;
        a.name = "param" + std::to_string(p.ordinal);
        a.offset = cbuf + k.param_base + p.offset;
        a.size = p.size;
        a.kind = KernelArg::Kind::Bytes;  // a cubin does not say which are pointers
        obj->args.push_back(a);
      }
      enc.prepare(*obj);
      kernels_[k.name] = std::move(obj);
    }
  }


 private:
  Buffer memory_;
};

std::unique_ptr<ProgramImage> RmDriver::load_program(Device& dev, std::span<const std::byte> image) {
  return std::make_unique<NvProgramImage>(dev, *this, image);
}

}  // namespace

std::unique_ptr<DeviceDriver> open_rm_device(std::shared_ptr<os::Kernel> kernel, int index,
                                             const std::string& device_name) {
  return std::make_unique<RmDriver>(std::move(kernel), index, device_name);
}

std::vector<std::string> rm_gpus(os::Kernel& kernel) {
  std::vector<std::string> out;
  int fd = kernel.open("/dev/nvidiactl", O_RDWR | O_CLOEXEC);
  if (fd < 0) return out;
  CardInfo cards[32] = {};
  if (kernel.ioctl(fd, esc(NV_ESC_CARD_INFO, sizeof(cards)), cards) == 0)
    for (auto& c : cards)
      if (c.valid)
        out.push_back("NVIDIA GPU " + hex(c.pci_info.device_id) + " at PCI " +
                      hex(c.pci_info.domain) + ":" + hex(c.pci_info.bus) + " (/dev/nvidia" +
                      std::to_string(c.minor_number) + ")");
  kernel.close(fd);
  return out;
}

}  // namespace hcq::nv
