#include "os/shm.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/deadline.hpp"
#include "core/error.hpp"
#include "os/cleanup.hpp"
#include "os/shm_locks.hpp"

namespace hcq::os {

namespace {

using shm_locks::kAttachByte;
using shm_locks::kPresenceByte;
using shm_locks::octal_mode;

bool set_lock(int fd, short type, off_t at, bool wait) {
  if (shm_locks::lock(fd, type, at, wait)) return true;
  if (errno == EAGAIN || errno == EACCES) return false;
  throw OsError("shared segment: fcntl(F_OFD_SETLK)", errno);
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 200 || n == "." || n == "..") return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

std::string describe(const SegmentHeader& h) {
  return "layout version " + std::to_string(h.layout_version) + " (" +
         std::to_string(h.payload_bytes) + " bytes), created by pid " + std::to_string(h.creator_pid);
}

}  // namespace

struct SharedSegment::Impl {
  int fd = -1;
  void* map = nullptr;
  size_t bytes = 0;
  int slot = -1;  // in os/cleanup.cpp's signal handler's list
  ~Impl() {
    forget_segment(slot);
    if (map) ::munmap(map, bytes);
    if (fd >= 0) ::close(fd);
  }
};

namespace {

// Another local user could create the name first (with mode 0666) and read or forge what
// hcq puts there: hcq attaches only to objects of its own effective user that nobody else
// may open.
void check_owner(int fd, const std::string& who, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw OsError(who + "fstat", errno);
  const uid_t me = ::geteuid();
  if (st.st_uid != me || (st.st_mode & 0177) != 0)
    throw InvalidInput(who + path + " belongs to uid " + std::to_string(st.st_uid) +
                       " with mode " + octal_mode(st.st_mode) +
                       "; hcq attaches only to segments of its own user (uid " +
                       std::to_string(me) + ") with mode 0600 or narrower");
}

}  // namespace

std::string SharedSegment::process_stat(int pid) {
  // read(2), not std::ifstream: a process reaped between the open and the read makes the read
  // fail with ESRCH, which libstdc++'s filebuf throws as std::ios_base::failure.
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string all;
  char buf[512];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      all.clear();
      break;
    }
    all.append(buf, size_t(n));
  }
  ::close(fd);
  return all;
}

uint64_t SharedSegment::process_start_time(int pid) {
  const std::string all = process_stat(pid);
  const size_t paren = all.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return 0;
  std::istringstream rest(all.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; i++)  // field 3 (the state) follows the name
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  return 0;
}

void SharedSegment::check_name(const std::string& name) {
  if (!valid_name(name))
    throw InvalidInput("shared segment '" + name +
                       "': a name is letters, digits, '.', '_' and '-' (1 to 200)");
}

SharedSegment::SharedSegment(const std::string& name, uint32_t layout_version,
                             uint64_t payload_bytes, std::chrono::milliseconds timeout)
    : SharedSegment(name, layout_version, payload_bytes, {}, timeout) {}

SharedSegment::SharedSegment(const std::string& name, uint32_t layout_version,
                             uint64_t payload_bytes,
                             const std::function<void(std::byte* payload)>& init,
                             std::chrono::milliseconds timeout)
    : name_(name) {
  check_name(name);
  const std::string who = "shared segment " + name + ": ";
  if (payload_bytes > kMaxPayloadBytes)
    throw InvalidInput(who + "a payload of " + std::to_string(payload_bytes) +
                       " bytes (at most " + std::to_string(kMaxPayloadBytes) + ")");
  const uint64_t total = sizeof(SegmentHeader) + payload_bytes;
  const auto deadline = deadline_after(timeout);
  const std::string shm_name = "/" + name, path = "/dev/shm/" + name;
  // Each pass opens what the name holds now, or makes it with O_EXCL: a name left by
  // processes that are gone is removed and made anew (never truncated in place, so no one
  // still holding the old object sees it change), and a name removed by the last process to
  // detach, or replaced by another attacher, while this one waited, is looked up again.
  for (;;) {
    auto impl = std::make_unique<Impl>();
    bool fresh = true;
    impl->fd = ::shm_open(shm_name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (impl->fd < 0 && errno == EEXIST) {
      fresh = false;
      impl->fd = ::shm_open(shm_name.c_str(), O_RDWR | O_CLOEXEC, 0);
      if (impl->fd < 0 && errno == ENOENT) continue;  // removed meanwhile
    }
    if (impl->fd < 0) throw OsError(who + "shm_open " + path, errno);
    // Known to the signal handler from the moment the name may be ours: a SIGINT while this
    // attaches detaches as the last one out would (a name made here and held by nobody else
    // goes), where remembering it once attached left a window in which it stayed behind.
    impl->slot = remember_segment(impl->fd, path);
    if (fresh && ::fchmod(impl->fd, 0600) != 0) {  // whatever the umask
      const int err = errno;
      ::shm_unlink(shm_name.c_str());
      throw OsError(who + "fchmod", err);
    }
    check_owner(impl->fd, who, path);
    static std::once_flag swept;  // what processes killed before they detached left
    std::call_once(swept, [] { sweep_shared_segments(); });
    const int fd = impl->fd;
    while (!set_lock(fd, F_WRLCK, kAttachByte, false)) {
      if (std::chrono::steady_clock::now() > deadline)
        throw TimeoutError(who + "another process held it for " + std::to_string(timeout.count()) +
                           " ms while attaching");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    struct stat mine {}, named {};
    if (::fstat(fd, &mine) != 0 || ::stat(path.c_str(), &named) != 0 || mine.st_ino != named.st_ino)
      continue;  // the name holds another object now
    if (!set_lock(fd, F_WRLCK, kPresenceByte, false)) {  // others are attached
      impl_ = std::move(impl);
      break;
    }
    if (!fresh) {
      // Nobody is attached: whatever is here was left by processes that are gone.
      SegmentHeader old{};
      const bool had = uint64_t(mine.st_size) >= sizeof(SegmentHeader) &&
                       ::pread(fd, &old, sizeof old, 0) == ssize_t(sizeof old);
      if (had && old.magic == SegmentHeader::kMagic)
        replaced_ = "left by processes that are gone: " + describe(old);
      else if (mine.st_size > 0)
        replaced_ = "left by processes that are gone: not an hcq segment";
      if (::shm_unlink(shm_name.c_str()) != 0 && errno != ENOENT)
        throw OsError(who + "shm_unlink " + path, errno);
      continue;  // closing it drops this process's locks on the old object
    }
    // Made here: the space is reserved now, so a full /dev/shm is this error rather than a
    // SIGBUS at some later write into the mapping.
    if (const int err = ::posix_fallocate(fd, 0, off_t(total)); err != 0) {
      ::shm_unlink(shm_name.c_str());
      throw OsError(who + "no room for " + std::to_string(total) + " bytes in /dev/shm", err);
    }
    created_ = true;
    impl_ = std::move(impl);
    break;
  }
  const int fd = impl_->fd;
  auto unlock_attach = [&] { set_lock(fd, F_UNLCK, kAttachByte, false); };
  try {
    if (!created_) {
      SegmentHeader old{};
      struct stat st {};
      const bool had = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) >= sizeof(SegmentHeader) &&
                       ::pread(fd, &old, sizeof old, 0) == ssize_t(sizeof old);
      if (!had || old.magic != SegmentHeader::kMagic || old.layout_version != layout_version ||
          old.header_bytes != sizeof(SegmentHeader) || old.payload_bytes != payload_bytes)
        throw InvalidInput(who + (had && old.magic == SegmentHeader::kMagic
                                      ? describe(old)
                                      : std::string("not an hcq segment")) +
                           ", is in use by other processes; this build uses layout version " +
                           std::to_string(layout_version) + " (" + std::to_string(payload_bytes) +
                           " bytes)");
      // Mapped past the object's end, a read would be a SIGBUS.
      if (uint64_t(st.st_size) < total)
        throw InvalidInput(who + "the object holds " + std::to_string(st.st_size) +
                           " bytes, fewer than the " + std::to_string(total) +
                           " its header gives: damaged, or not made by hcq");
    }
    set_lock(fd, F_RDLCK, kPresenceByte, false);  // attached (a downgrade where it was ours)
    void* m = ::mmap(nullptr, size_t(total), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) throw OsError(who + "mmap of " + std::to_string(total) + " bytes", errno);
    impl_->map = m;
    impl_->bytes = size_t(total);
    base_ = m;
    if (created_) {
      SegmentHeader h;
      h.magic = SegmentHeader::kMagic;
      h.layout_version = layout_version;
      h.header_bytes = sizeof(SegmentHeader);
      h.payload_bytes = payload_bytes;
      h.creator_pid = int32_t(::getpid());
      h.creator_start_time = process_start_time(::getpid());
      std::memcpy(base_, &h, sizeof h);
      if (init) init(payload());  // still under the attach lock: nobody else is in yet
    }
  } catch (...) {
    unlock_attach();
    if (created_) ::shm_unlink(shm_name.c_str());
    throw;
  }
  unlock_attach();
}

SharedSegment::~SharedSegment() {
  forget_segment(impl_->slot);  // detached here, not by the signal handler
  impl_->slot = -1;
  const int fd = impl_->fd;
  // Detaching waits briefly for a process attaching right now; after 2 s it leaves the name
  // to the next one (a segment nobody holds is made afresh anyway).
  bool serialised = false;
  for (int i = 0; i < 2000 && !serialised; i++) {
    try {
      serialised = set_lock(fd, F_WRLCK, kAttachByte, false);
    } catch (const Error&) {
      break;
    }
    if (!serialised) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::munmap(impl_->map, impl_->bytes);
  impl_->map = nullptr;
  try {
    set_lock(fd, F_UNLCK, kPresenceByte, false);
    if (serialised && set_lock(fd, F_WRLCK, kPresenceByte, false)) {
      // The last one out removes the name, if it still names this object.
      struct stat mine {}, named {};
      if (::fstat(fd, &mine) == 0 && ::stat(("/dev/shm/" + name_).c_str(), &named) == 0 &&
          mine.st_ino == named.st_ino && mine.st_dev == named.st_dev)
        ::shm_unlink(("/" + name_).c_str());
    }
  } catch (const Error&) {
  }
}

size_t sweep_shared_segments() {
  // Emulated machines' segments are named for their process (os/device_owner.cpp:
  // hcq.emu.p<pid>-...): once it is gone nobody attaches to them again. Each is removed as
  // the last one out would remove it: under the attach lock, when no one holds presence.
  DIR* d = ::opendir("/dev/shm");
  if (!d) return 0;
  size_t removed = 0;
  const std::string prefix = "hcq.emu.p";
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    const int pid = std::atoi(n.c_str() + prefix.size());
    if (pid <= 0 || SharedSegment::process_start_time(pid) != 0) continue;  // it may live
    const std::string path = "/dev/shm/" + n;
    const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat mine {}, named {};
    try {
      if (::fstat(fd, &mine) == 0 && S_ISREG(mine.st_mode) && mine.st_uid == ::geteuid() &&
          set_lock(fd, F_WRLCK, kAttachByte, false) &&
          set_lock(fd, F_WRLCK, kPresenceByte, false) && ::stat(path.c_str(), &named) == 0 &&
          mine.st_ino == named.st_ino && mine.st_dev == named.st_dev &&
          ::unlink(path.c_str()) == 0)
        removed++;
    } catch (const Error&) {
    }
    ::close(fd);
  }
  ::closedir(d);
  return removed;
}

namespace {
// Role bytes lie past the attach and presence bytes, with room left for more of those.
constexpr off_t kRoleByte = 16;

off_t role_byte(unsigned role) {
  if (role >= SharedSegment::kRoles)
    throw InvalidInput("shared segment: role " + std::to_string(role) + " (0 to " +
                       std::to_string(SharedSegment::kRoles - 1) + ")");
  return kRoleByte + off_t(role);
}
}  // namespace

bool SharedSegment::hold_role(unsigned role) {
  return set_lock(impl_->fd, F_WRLCK, role_byte(role), false);
}

void SharedSegment::release_role(unsigned role) {
  set_lock(impl_->fd, F_UNLCK, role_byte(role), false);
}

bool SharedSegment::role_held(unsigned role) const {
  // F_OFD_GETLK reports a lock of another open file description that would conflict; this
  // one's own lock never does.
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = role_byte(role);
  l.l_len = 1;
  if (::fcntl(impl_->fd, F_OFD_GETLK, &l) != 0)
    throw OsError("shared segment: fcntl(F_OFD_GETLK)", errno);
  return l.l_type != F_UNLCK;
}

RobustLock::RobustLock() {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  const int err = pthread_mutex_init(&mutex_, &a);
  pthread_mutexattr_destroy(&a);
  if (err) throw OsError("shared lock: pthread_mutex_init", err);
}

bool RobustLock::lock(std::chrono::milliseconds timeout) {
  timespec until{};
  clock_gettime(CLOCK_REALTIME, &until);  // pthread_mutex_timedlock counts in CLOCK_REALTIME
  const auto ns = uint64_t(until.tv_nsec) +
                  uint64_t(std::chrono::nanoseconds(bounded_wait(timeout)).count());
  until.tv_sec += time_t(ns / 1'000'000'000);
  until.tv_nsec = long(ns % 1'000'000'000);
  const int err = pthread_mutex_timedlock(&mutex_, &until);
  if (err == 0) return false;
  if (err == EOWNERDEAD) {  // its holder died inside: ours now, made usable again
    pthread_mutex_consistent(&mutex_);
    return true;
  }
  if (err == ETIMEDOUT)
    throw TimeoutError("shared lock: not acquired in " + std::to_string(timeout.count()) + " ms");
  throw OsError("shared lock: pthread_mutex_timedlock", err);
}

void RobustLock::unlock() { pthread_mutex_unlock(&mutex_); }

}  // namespace hcq::os
