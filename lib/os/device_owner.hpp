#pragma once
// Device ownership between processes (issue 19 part 2): a device hcq drives itself (its BARs
// through VFIO or sysfs, or through a USB bridge) is claimed by one process at a time, and the
// device's firmware mailboxes (numbered by the driver: AMD's SMU and PSP) have a lock every
// process that reaches them takes.
//
// Each device has a SharedSegment (os/shm.hpp) named after its hardware identity, holding a
// DeviceRecord: who owns it (pid, start time, command line, since when) and one SharedMailbox
// per firmware mailbox. The owner is whoever wrote a record whose pid and start time name a
// live process: a SIGKILLed owner's record is stale the moment it dies (and its segment is
// made afresh by the next attach when nobody else was attached). Claims are made under the
// record's RobustLock, so two processes opening at once never both win.
//
// Emulated devices live in an emulated machine of one process: their records are scoped to
// it (shared_name_prefix), so two test processes opening emu:gfx1100_am never meet, unless a
// test gives both one scope (HCQ_EMULATED_SCOPE or set_emulated_scope).
//
// Thread safety: a DeviceOwner's members may be called from any thread; a MailboxSection is
// one thread's. shared_name_prefix, set_emulated_scope and device_holder may be called from
// several threads at once.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "os/kernel.hpp"
#include "os/shm.hpp"

namespace hcq::os {

// A firmware mailbox every process reaching one device shares (in its DeviceRecord).
struct SharedMailbox {
  RobustLock lock;
  // Guarded by `lock`: 1 from a holder's first register write until its response came, so a
  // holder that died or timed out inside leaves it set for the next one to mend.
  uint32_t busy = 0;
  // Guarded by `lock`: how many sections found the mailbox left mid-exchange.
  uint32_t interruptions = 0;
};

// One exchange on a SharedMailbox, from lock to unlock.
class MailboxSection {
 public:
  // Locks `m` (TimeoutError "shared lock: not acquired in 5000 ms" as RobustLock::lock).
  explicit MailboxSection(SharedMailbox& m,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  ~MailboxSection() { mailbox_.lock.unlock(); }
  MailboxSection(const MailboxSection&) = delete;
  MailboxSection& operator=(const MailboxSection&) = delete;
  // Whether the previous exchange did not finish: its holder died inside (the robust lock
  // said so) or gave up waiting for the response. The caller re-syncs the mailbox first.
  bool interrupted() const { return interrupted_; }
  bool holder_died() const { return holder_died_; }
  // Around the register accesses: begin() before the first write, end() once the response
  // came (whatever it said). A section that ends without end() leaves the mailbox busy.
  void begin() { mailbox_.busy = 1; }
  void end() { mailbox_.busy = 0; }

 private:
  SharedMailbox& mailbox_;
  bool holder_died_ = false, interrupted_ = false;
};

// The fixed layout of a device's segment payload (layout version kLayoutVersion).
struct DeviceRecord {
  static constexpr uint32_t kLayoutVersion = 1;
  static constexpr size_t kCommandBytes = 256, kDeviceBytes = 64;
  static constexpr size_t kMailboxes = 2;
  RobustLock owner_lock;  // guards the owner fields
  int32_t owner_pid = 0;  // 0: nobody
  uint32_t reserved = 0;
  uint64_t owner_start_time = 0;  // /proc/<pid>/stat field 22
  int64_t since_unix_ms = 0;
  char command[kCommandBytes] = {};  // /proc/<pid>/cmdline, arguments joined by spaces, cut
  char device[kDeviceBytes] = {};    // the name it was opened by ("am:0000:03:00.0")
  SharedMailbox mailboxes[kMailboxes];  // by the driver's numbering
};

// Who holds a device.
struct DeviceHolder {
  int pid = 0;
  uint64_t start_time = 0;
  std::string command, device;
  int64_t since_unix_ms = 0;
  // "pid 1234 (hcq run am:0000:03:00.0), since 2026-12-02 11:42:20 UTC"
  std::string describe() const;
};

// The prefix of the shared names `kernel`'s devices use: "hcq." for the real OS;
// "hcq.emu.<scope>." for an emulated kernel, the scope being set_emulated_scope's, else
// $HCQ_EMULATED_SCOPE's, else "p<pid>-<the kernel's address>" (its own machine).
std::string shared_name_prefix(const Kernel& kernel);
// Scopes every emulated kernel of this process (empty: back to the default).
void set_emulated_scope(const std::string& scope);
// The segment of device `key` (its hardware identity: a PCI address "0000:03:00.0", a USB
// port "usb.2-1"): the prefix, "dev.", then the key with ':' as '_' ("hcq.dev.0000_03_00.0").
std::string device_segment_name(const Kernel& kernel, const std::string& key);

// This process's command line as a holder shows it (arguments joined by spaces, cut to
// kCommandBytes - 1 bytes).
std::string own_command_line();

class DeviceOwner {
 public:
  // Claims device `key` for this process, as `device_name`. Throws InvalidInput when a live
  // process holds it: "am:0000:03:00.0: in use by pid 1234 (hcq run am:0000:03:00.0), since
  // 2026-12-02 11:42:20 UTC"; what SharedSegment and RobustLock throw otherwise.
  DeviceOwner(const Kernel& kernel, const std::string& key, const std::string& device_name);
  // Releases the claim (the segment goes with the last process attached).
  ~DeviceOwner();
  DeviceOwner(const DeviceOwner&) = delete;
  DeviceOwner& operator=(const DeviceOwner&) = delete;

  // Firmware mailbox `i`'s lock, as the device's driver numbers its mailboxes. InvalidInput
  // for i >= DeviceRecord::kMailboxes.
  SharedMailbox& mailbox(size_t i);
  const std::string& segment_name() const { return segment_.name(); }
  // What the claim replaced: "" or a stale owner ("pid 99 (hcq run ...), since ..., gone").
  const std::string& reclaimed() const { return reclaimed_; }

 private:
  SharedSegment segment_;
  DeviceRecord* record_;
  std::string reclaimed_;
};

// Who holds device `key` of `kernel` now; nothing when nobody (or no segment exists).
std::optional<DeviceHolder> device_holder(const Kernel& kernel, const std::string& key);

}  // namespace hcq::os
