#include "nv/rm_driver.hpp"
#include "os/address_window.hpp"

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "nv/encoders.hpp"
#include "nv/rm_abi.hpp"
#include "nv/rm_channel.hpp"
#include "nv/rm_device.hpp"
#include "nv/rm_program.hpp"
#include "nv/targets.hpp"

namespace hcq::nv {
namespace {

using namespace rm;

// One host address range serves as GPU virtual addresses (CPU and GPU see buffers at the same
// address). Its first part holds the driver's own objects (GPFIFO rings, push buffers,
// notifiers, channel ranges UVM keeps for RM); lib/core's heap hands out the rest.
constexpr uint64_t kPrivateVa = 4ull << 30;
constexpr uint64_t kHeapVa = 256ull << 30;
constexpr uint64_t kGpfifoVaLimit = 1ull << 40;  // push buffers must lie below (40-bit entries)
// NVOS33 flags tinygrad maps the usermode page with.
constexpr uint32_t kUsermodeMapFlags = 2;

std::string status_text(NvStatus s) {
  const char* n = status_name(s);
  return n ? std::string(n) : "NV_STATUS " + hex(s);
}

// One switch of nv/options.hpp: unset or "0" off, "1" on.
bool switch_from_environment(const char* variable) {
  const char* v = std::getenv(variable);
  if (!v || std::string_view(v) == "0") return false;
  if (std::string_view(v) == "1") return true;
  throw InvalidInput(std::string(variable) + "='" + v + "': expected 0 or 1");
}

}  // namespace

NvOptions NvOptions::from_environment() {
  NvOptions o;
  o.gpfifo_host = switch_from_environment("HCQ_NV_GPFIFO_HOST");
  o.qmd_by_address = switch_from_environment("HCQ_NV_QMD_BY_ADDRESS");
  return o;
}

std::string NvOptions::text() const {
  std::string out;
  if (gpfifo_host) out += "gpfifo_host";
  if (qmd_by_address) out += out.empty() ? "qmd_by_address" : ",qmd_by_address";
  return out;
}

RmDriver::RmDriver(std::shared_ptr<os::Kernel> kernel, int index, const std::string& name,
                   const NvOptions& options)
    : kernel_(std::move(kernel)), options_(options) {
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
  if (os::wanted_heap_base()) {  // hcq replay: where the capture had it, or an error
    const Layout& l = layouts[os::wanted_heap_base() >= (64ull << 30) ? 0 : 1];
    reserve_size_ = l.private_bytes + l.heap_bytes;
    if (os::wanted_heap_base() + l.heap_bytes > l.limit)
      throw InvalidInput(name + ": cannot place its GPU addresses at " +
                         hex(os::wanted_heap_base()) + ": above the " + hex(l.limit) +
                         " its GPFIFO entries and this layout reach");
    base = reinterpret_cast<void*>(os::reserve_window(*kernel_, reserve_size_, l.private_bytes, name));
    private_bytes_ = l.private_bytes;
    heap_bytes_ = l.heap_bytes;
  }
  for (const Layout& l : layouts) {
    if (base != MAP_FAILED) break;
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
  // The switches on (nv/options.hpp), so every figure and log names the path it took.
  if (const std::string on = options_.text(); !on.empty()) props_.description += " [" + on + "]";
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
  return map_object(h, va, size, kind);
}

Allocation RmDriver::map_object(NvHandle h, uint64_t va, uint64_t size, MemoryKind kind) {
  const bool system = kind == MemoryKind::Host;
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

// Sharing with another process, as CUDA IPC does it: the memory object exported to a fresh
// /dev/nvidiactl fd (NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD), which travels over the
// socket; the importer dups it into its own client (IMPORT_OBJECT_FROM_FD) and maps the new
// handle for the CPU and through UVM at its own address.
int RmDriver::export_memory(const Allocation& a) {
  if (a.user)
    throw InvalidInput(props_.name + ": the caller's host memory at " + hex(a.va) +
                       " cannot be exported");
  const int ctl = kernel_->open("/dev/nvidiactl", O_RDWR | O_CLOEXEC);
  if (ctl < 0) throw OsError(props_.name + ": open /dev/nvidiactl", -ctl);
  OsUnixExportObjectToFdParams p{};
  p.object = {NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM, device_, device_, NvHandle(a.handle)};
  p.fd = ctl;
  try {
    control(root_, NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD, &p, sizeof(p),
            "OS_UNIX_EXPORT_OBJECT_TO_FD");
  } catch (...) {
    kernel_->close(ctl);
    throw;
  }
  const int out = kernel_->passable_fd(ctl);
  kernel_->close(ctl);
  if (out < 0) throw OsError(props_.name + ": the export fd", -out);
  return out;
}

Allocation RmDriver::import_memory(int fd, uint64_t va, uint64_t size, MemoryKind kind) {
  OsUnixImportObjectFromFdParams p{};
  p.fd = fd;
  {
    std::lock_guard lk(mu_);
    p.object = {NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TYPE_RM, device_, device_, next_handle_++};
  }
  control(root_, NV0000_CTRL_CMD_OS_UNIX_IMPORT_OBJECT_FROM_FD, &p, sizeof(p),
          "OS_UNIX_IMPORT_OBJECT_FROM_FD");
  return map_object(p.object.hObject, va, size, kind);
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
  return std::make_unique<GpfifoChannel>(*this, kind, index);
}

void RmDriver::submit_indirect(std::span<const IndirectRun> runs) {
  if (runs.empty()) return;
  check_faults();  // once for all: it looks at every channel's error notifier
  // Every queue of this device is one of its channels. Every entry is checked before any is
  // written, so a refused run leaves nothing half submitted.
  for (const IndirectRun& r : runs) static_cast<GpfifoChannel*>(r.queue)->check_entry(r.ndwords);
  for (const IndirectRun& r : runs) static_cast<GpfifoChannel*>(r.queue)->stage_indirect(r.va, r.ndwords);
  // One read orders every GP_PUT and entry written above (all through BAR1) before the
  // doorbells; a channel another thread submits to in between is covered by its own read.
  // With the rings in host memory (HCQ_NV_GPFIFO_HOST) nothing went through BAR1.
  if (!options_.gpfifo_host) static_cast<GpfifoChannel*>(runs.back().queue)->order_writes();
  for (const IndirectRun& r : runs) static_cast<GpfifoChannel*>(r.queue)->ring_doorbell();
}

std::unique_ptr<Encoder> RmDriver::encoder(QueueKind kind) {
  if (kind == QueueKind::Compute) {
    if (!options_.qmd_by_address) return std::make_unique<ComputeEncoder>(qmd_);
    // The QMD goes where the CPU sees the kernarg area (at its own address, as all of this
    // driver's CPU-visible memory).
    return std::make_unique<ComputeEncoder>(qmd_, [this](uint64_t va, uint64_t bytes) {
      return const_cast<void*>(host_view(va, bytes));
    });
  }
  return std::make_unique<CopyEncoder>();
}

void RmDriver::check_faults() {
  if (!fault_.set()) {
    std::string what;
    {
      std::lock_guard lk(mu_);
      for (GpfifoChannel* c : channels_) {
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
      [&] { return fault_message(*kernel_, props_.name, what, hang_report()); });
}

std::string RmDriver::hang_report() {
  std::vector<GpfifoChannel*> chans;
  {
    std::lock_guard lk(mu_);
    chans = channels_;
  }
  std::string out;
  for (GpfifoChannel* c : chans) {
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

ProgramLayout RmDriver::program_layout(std::span<const std::byte> image) {
  return cubin_layout(*this, image);
}

std::unique_ptr<DeviceDriver> open_rm_device(std::shared_ptr<os::Kernel> kernel, int index,
                                             const std::string& device_name,
                                             const NvOptions& options) {
  return std::make_unique<RmDriver>(std::move(kernel), index, device_name, options);
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
