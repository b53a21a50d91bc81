#include "os/shm.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.hpp"

namespace hcq::os {

namespace bip = boost::interprocess;

namespace {

// Byte 0: held exclusively while attaching or detaching. Byte 1: held shared by every process
// attached (open-file-description locks, Linux 3.15+: per open file, dropped when it closes).
constexpr off_t kAttachByte = 0, kPresenceByte = 1;

bool set_lock(int fd, short type, off_t at, bool wait) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = at;
  l.l_len = 1;
  if (::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &l) == 0) return true;
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
  bip::shared_memory_object shm;
  bip::mapped_region region;
  int fd() const { return shm.get_mapping_handle().handle; }
};

uint64_t SharedSegment::process_start_time(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
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
  const uint64_t total = sizeof(SegmentHeader) + payload_bytes;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string who = "shared segment " + name + ": ";
  for (;;) {
    try {
      impl_ = std::make_unique<Impl>(Impl{
          bip::shared_memory_object(bip::open_or_create, name.c_str(), bip::read_write,
                                    bip::permissions(0600)),
          {}});
    } catch (const bip::interprocess_exception& e) {
      throw OsError(who + "shm_open: " + e.what(), e.get_native_error());
    }
    const int fd = impl_->fd();
    while (!set_lock(fd, F_WRLCK, kAttachByte, false)) {
      if (std::chrono::steady_clock::now() > deadline)
        throw TimeoutError(who + "another process held it for " + std::to_string(timeout.count()) +
                           " ms while attaching");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // The last process to detach may have removed the name while this one waited: attach
    // to the object the name has now.
    struct stat mine {}, named {};
    if (::fstat(fd, &mine) == 0 && ::stat(("/dev/shm/" + name).c_str(), &named) == 0 &&
        mine.st_ino == named.st_ino)
      break;
    impl_.reset();
  }
  const int fd = impl_->fd();
  auto unlock_attach = [&] { set_lock(fd, F_UNLCK, kAttachByte, false); };
  try {
    SegmentHeader old{};
    struct stat st {};
    const bool had = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) >= sizeof(SegmentHeader) &&
                     ::pread(fd, &old, sizeof old, 0) == ssize_t(sizeof old);
    if (set_lock(fd, F_WRLCK, kPresenceByte, false)) {
      // Nobody is attached: whatever is here was left by processes that are gone.
      if (had && old.magic == SegmentHeader::kMagic)
        replaced_ = "left by processes that are gone: " + describe(old);
      else if (st.st_size > 0)
        replaced_ = "left by processes that are gone: not an hcq segment";
      impl_->shm.truncate(0);  // every byte zero again
      impl_->shm.truncate(bip::offset_t(total));
      created_ = true;
    } else {
      if (!had || old.magic != SegmentHeader::kMagic || old.layout_version != layout_version ||
          old.header_bytes != sizeof(SegmentHeader) || old.payload_bytes != payload_bytes)
        throw InvalidInput(who + (had && old.magic == SegmentHeader::kMagic
                                      ? describe(old)
                                      : std::string("not an hcq segment")) +
                           ", is in use by other processes; this build uses layout version " +
                           std::to_string(layout_version) + " (" + std::to_string(payload_bytes) +
                           " bytes)");
    }
    set_lock(fd, F_RDLCK, kPresenceByte, false);  // attached (a downgrade where it was ours)
    impl_->region = bip::mapped_region(impl_->shm, bip::read_write, 0, total);
    base_ = impl_->region.get_address();
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
  } catch (const bip::interprocess_exception& e) {
    unlock_attach();
    throw OsError(who + e.what(), e.get_native_error());
  } catch (...) {
    unlock_attach();
    throw;
  }
  unlock_attach();
}

SharedSegment::~SharedSegment() {
  const int fd = impl_->fd();
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
  impl_->region = bip::mapped_region();
  try {
    set_lock(fd, F_UNLCK, kPresenceByte, false);
    if (serialised && set_lock(fd, F_WRLCK, kPresenceByte, false))
      bip::shared_memory_object::remove(name_.c_str());  // the last one out
  } catch (const Error&) {
  }
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
  return set_lock(impl_->fd(), F_WRLCK, role_byte(role), false);
}

void SharedSegment::release_role(unsigned role) {
  set_lock(impl_->fd(), F_UNLCK, role_byte(role), false);
}

bool SharedSegment::role_held(unsigned role) const {
  // F_OFD_GETLK reports a lock of another open file description that would conflict; this
  // one's own lock never does.
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = role_byte(role);
  l.l_len = 1;
  if (::fcntl(impl_->fd(), F_OFD_GETLK, &l) != 0)
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
  const auto ns = uint64_t(until.tv_nsec) + uint64_t(timeout.count()) * 1'000'000;
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
