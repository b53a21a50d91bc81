#pragma once
// Shared memory between processes: named segments with a versioned header, and a lock that
// survives the death of the process holding it.
//
// A segment is a POSIX shared-memory object (/dev/shm/<name>, through Boost.Interprocess)
// holding a SegmentHeader, then a payload of fixed layout. Every process attached to it holds
// a shared open-file-description lock on its byte 1 for as long as it is attached; the kernel
// drops that lock when the process dies however it dies. So whoever opens a segment that
// nobody holds knows that what is there was left by processes that are gone (or is of another
// layout) and creates it afresh; and the last process to detach removes the name, so a clean
// exit leaves nothing in /dev/shm. Opening and detaching are serialised by an exclusive lock
// on byte 0, held only for those moments.
//
// Thread safety: a SharedSegment is used by one thread at a time (its payload is what the
// caller guards); any number of SharedSegments, in this process or others, may be open on one
// name at once. RobustLock's lock/unlock may be called from any thread of any process that
// maps it.
#include <pthread.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace hcq::os {

struct SegmentHeader {
  static constexpr uint64_t kMagic = 0x31474553'51434800ull;  // "\0HCQSEG1" little-endian
  uint64_t magic = 0;
  uint32_t layout_version = 0;  // the payload's layout, as the creator's build defines it
  uint32_t header_bytes = 0;    // sizeof(SegmentHeader) when it was made
  uint64_t payload_bytes = 0;
  int32_t creator_pid = 0;
  uint32_t reserved = 0;
  uint64_t creator_start_time = 0;  // /proc/<pid>/stat field 22 (clock ticks after boot)
};

class SharedSegment {
 public:
  static constexpr uint64_t kMaxPayloadBytes = uint64_t(1) << 40;

  // Attaches to segment `name` (letters, digits, '.', '_' and '-', at most 200 characters) of
  // `layout_version` with `payload_bytes` after the header, creating it afresh (payload
  // zeroed) when nobody is attached: with O_EXCL, mode 0600, its space reserved; a name left
  // by processes that are gone is removed first, never reused in place. Only objects of this
  // process's effective user with mode 0600 or narrower are opened. Errors (InvalidInput /
  // OsError / TimeoutError):
  //   "shared segment 'a/b': a name is letters, digits, '.', '_' and '-' (1 to 200)"
  //   "shared segment NAME: /dev/shm/NAME belongs to uid 1001 with mode 0666; hcq attaches
  //    only to segments of its own user (uid 0) with mode 0600 or narrower"
  //   "shared segment NAME: layout version 1 (4096 bytes), created by pid 123, is in use by
  //    other processes; this build uses layout version 2 (8192 bytes)"
  //   "shared segment NAME: the object holds 64 bytes, fewer than the 4128 its header gives:
  //    damaged, or not made by hcq"
  //   "shared segment NAME: no room for 33554464 bytes in /dev/shm: No space left on device
  //    (errno 28)"
  //   "shared segment NAME: another process held it for 5000 ms while attaching"
  SharedSegment(const std::string& name, uint32_t layout_version, uint64_t payload_bytes,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  // The same, and `init` builds the payload (placement new of its locks) when this attach
  // creates it, before any other process can attach: nobody sees a lock half made.
  SharedSegment(const std::string& name, uint32_t layout_version, uint64_t payload_bytes,
                const std::function<void(std::byte* payload)>& init,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  const std::string& name() const { return name_; }
  const SegmentHeader& header() const { return *static_cast<const SegmentHeader*>(base_); }
  std::byte* payload() const { return static_cast<std::byte*>(base_) + sizeof(SegmentHeader); }
  uint64_t payload_bytes() const { return header().payload_bytes; }
  // Whether this attach made the segment, and what it replaced: "" for a name that did not
  // exist, else why the old one went ("left by processes that are gone: layout version 1,
  // created by pid 123").
  bool created() const { return created_; }
  const std::string& replaced() const { return replaced_; }

  // The start time /proc gives a process (field 22 of /proc/<pid>/stat), 0 when it is gone:
  // with the pid it names one process, whatever pid reuse does.
  static uint64_t process_start_time(int pid);
  // /proc/<pid>/stat's text, "" when the process is gone (also when it is reaped while read).
  static std::string process_stat(int pid);
  // Throws the constructor's InvalidInput for a name it would refuse (for callers that look
  // for a segment before attaching to it).
  static void check_name(const std::string& name);

  // Roles (live capture, issue 19 part 3): an exclusive open-file-description lock on byte
  // kRoleByte + role of the object (roles 0 to 15), held until release_role(), this
  // SharedSegment's end or its process's death, however it dies: so another process can tell
  // a role's holder is gone even after a SIGKILL. hold_role() is false when another
  // SharedSegment (in any process) holds it. role_held() says whether another one does.
  static constexpr unsigned kRoles = 16;
  bool hold_role(unsigned role);
  void release_role(unsigned role);
  bool role_held(unsigned role) const;

 private:
  struct Impl;  // the Boost.Interprocess object and mapping
  std::string name_;
  std::unique_ptr<Impl> impl_;
  void* base_ = nullptr;
  bool created_ = false;
  std::string replaced_;
};

// A mutex in shared memory that survives its holder's death: a process-shared robust pthread
// mutex. lock() says whether the last holder died inside its section, so the state it guards
// may be half written; the lock is made consistent again and held either way.
class RobustLock {
 public:
  // Construct in place in memory every user maps (placement new by the segment's creator).
  RobustLock();
  RobustLock(const RobustLock&) = delete;
  RobustLock& operator=(const RobustLock&) = delete;
  // True: the previous holder died holding it. TimeoutError "shared lock: not acquired in
  // 5000 ms" when another holder keeps it.
  bool lock(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  void unlock();

 private:
  pthread_mutex_t mutex_;
};

}  // namespace hcq::os
