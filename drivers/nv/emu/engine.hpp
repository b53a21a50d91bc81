// The emulated NVIDIA GPU: a host front end that follows each channel's GP_PUT once the
// work-submit doorbell is written, fetches the push buffer segments its GPFIFO entries point
// at, and executes the methods with the descriptions the encoders use (nv/classes.def,
// nv/qmd.def): host semaphores, the compute class's inline-to-memory DMA and QMD launches
// (running the registered CPU implementation of the kernel), and the copy class's linear
// copies. Unknown methods, malformed QMDs and unmapped addresses stop the channel with a
// channel error, written to its error notifier as RM does.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emu/interleave.hpp"
#include "emu/memory.hpp"
#include "nv/push.hpp"

namespace hcq::nv::emu {

using hcq::emu::Memory;

// What this GPU's front end accepts: its classes and QMD version.
struct GpuClasses {
  Gen gen = Gen::Hopper;
  uint32_t compute_class = 0, copy_class = 0;
  QmdVersion qmd = QmdVersion::V03;
};

struct ChannelDesc {
  uint32_t id = 0;          // the driver's name for it (the RM handle)
  uint32_t token = 0;       // work-submit token the doorbell carries
  uint64_t gpfifo_va = 0;   // GPFIFO ring: `entries` 8-byte entries
  uint32_t entries = 0;
  uint64_t userd_va = 0;    // USERD: GP_GET at +0x88, GP_PUT at +0x8c
  uint64_t notifier_va = 0; // error notifier (16-byte NvNotification); 0 for none
  std::string name;         // "channel 0xcaf00010" in messages
};

class GpuEvents {
 public:
  virtual ~GpuEvents() = default;
  // A channel stopped; `rc` is the robust-channel error code written to its notifier.
  virtual void channel_error(uint32_t channel, uint32_t rc, const std::string& what) = 0;
  virtual void nonstall_interrupt() = 0;
};

// Robust-channel error codes written to error notifiers (open-gpu-kernel-modules
// src/common/sdk/nvidia/inc/nverror.h: ROBUST_CHANNEL_GR_ERROR_MISSING_HW 11, what an H200 on
// RM 580.159 reports for an unknown compute method; ROBUST_CHANNEL_GR_EXCEPTION 13;
// ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT 31).
inline constexpr uint32_t kRcGrMissingHw = 11, kRcGrException = 13, kRcMmuFault = 31;
// ROBUST_CHANNEL_GR_CLASS_ERROR: a method's value the class refuses.
inline constexpr uint32_t kRcGrClassError = 69;
// NvNotification: timeStamp (8 bytes), info32, info16, status; RM sets status to 0xffff
// (NV_NOTIFICATION_STATUS_IN_PROGRESS is 0x8000; any nonzero status reads as an error here).
inline constexpr uint16_t kNotifierErrorStatus = 0xffff;

class Engine {
 public:
  Engine(const GpuClasses& classes, Memory& memory, GpuEvents& events);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void add_channel(const ChannelDesc& c);
  void remove_channel(uint32_t id);
  // The usermode page's NOTIFY_CHANNEL_PENDING register; the engine watches it.
  void watch_doorbell(volatile uint32_t* reg);
  uint64_t timestamp() const;  // the GPU timer: nanoseconds

 private:
  struct Channel;
  struct KernelCache;
  // Yield: the turn's packets are used up (HCQ_EMU_INTERLEAVE_SEED); it resumes there.
  enum class Res : uint8_t { Done, Blocked, Yield };
  void run();
  bool pass();
  bool step(Channel& c);
  Res exec_segment(Channel& c);
  // Publishes where the engine waits (USERD Get/GetHi) and returns Res::Blocked.
  Res blocked_at(Channel& c);
  void fetch_rest(Channel& c);  // take the rest of the segment and move GP_GET past it
  Res method(Channel& c, uint32_t subchannel, uint16_t m, uint32_t data);
  Res host_method(Channel& c, uint16_t m, uint32_t data);
  void compute_method(Channel& c, uint32_t sub, uint16_t m, uint32_t data);
  void copy_method(Channel& c, uint32_t sub, uint16_t m, uint32_t data);
  void inline_data(Channel& c, const uint32_t* data, uint32_t dwords);
  void launch(Channel& c, uint64_t qmd_va);
  // One QMD's launch; returns the dependent QMD it schedules (0 for none).
  uint64_t launch_one(Channel& c, uint64_t qmd_va);
  void fail(Channel& c, uint32_t rc, const std::string& what);

  GpuClasses classes_;
  Memory& mem_;
  GpuEvents& events_;
  std::mutex exec_mu_;  // held during a pass; add/remove take it
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::unique_ptr<KernelCache> kernels_;
  volatile uint32_t* doorbell_ = nullptr;
  hcq::emu::Preemption preemption_;  // the running kernel's channel; abandons it
  hcq::emu::Interleaver interleave_ = hcq::emu::Interleaver::from_environment();
  std::vector<Channel*> order_;  // engine thread: this pass's visiting order
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The doorbell register's value while no write is pending (tokens never take it).
inline constexpr uint32_t kDoorbellIdle = 0xffffffffu;

}  // namespace hcq::nv::emu
