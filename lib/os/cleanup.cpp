#include "os/cleanup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/error.hpp"
#include "os/shm.hpp"
#include "os/shm_locks.hpp"

namespace hcq::os {

namespace fs = std::filesystem;

namespace {

// What the signal handler removes: a fixed list it reads without locks. A slot goes free ->
// filling -> ready (the handler takes it) -> free.
enum SlotState : int { kFree = 0, kFilling = 1, kReady = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  bool tree = false;  // a temporary tree; else a segment's fd
  int fd = -1;
  char path[512] = {};
};
constexpr int kSlots = 128;
Slot slots[kSlots];

int remember(bool tree, int fd, const std::string& path) {
  if (path.size() >= sizeof Slot::path) return -1;
  for (int i = 0; i < kSlots; i++) {
    int expect = kFree;
    if (!slots[i].state.compare_exchange_strong(expect, kFilling)) continue;
    slots[i].tree = tree;
    slots[i].fd = fd;
    std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
    slots[i].state.store(kReady, std::memory_order_release);
    return i;
  }
  return -1;
}

void forget(int slot) {
  if (slot >= 0) slots[slot].state.store(kFree, std::memory_order_release);
}

// ---- the handler's work: system calls only (async-signal-safe) ----

struct Dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

bool dot(const char* n) { return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])); }

// Removes what directory `dfd` holds, `depth` levels down at most.
void remove_entries(int dfd, int depth) {
  alignas(8) char buf[2048];
  for (int pass = 0; pass < 64; pass++) {  // removing while reading may skip entries: again
    if (::lseek(dfd, 0, SEEK_SET) < 0) return;
    bool any = false;
    for (;;) {
      const long n = ::syscall(SYS_getdents64, dfd, buf, sizeof buf);
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        auto* d = reinterpret_cast<Dirent64*>(buf + at);
        at += d->reclen;
        if (dot(d->name)) continue;
        any = true;
        if (::unlinkat(dfd, d->name, 0) == 0 || errno != EISDIR || depth == 0) continue;
        const int sub = ::openat(dfd, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) continue;
        remove_entries(sub, depth - 1);
        ::close(sub);
        ::unlinkat(dfd, d->name, AT_REMOVEDIR);
      }
    }
    if (!any) return;
  }
}

void remove_tree_now(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  remove_entries(fd, 16);
  ::close(fd);
  ::rmdir(path);
}

// os/shm.cpp's detach, as the last one out: removes the name when nobody else holds it.
void detach_segment_now(int fd, const char* path) {
  using shm_locks::kAttachByte;
  using shm_locks::kPresenceByte;
  using shm_locks::lock;
  if (!lock(fd, F_WRLCK, kAttachByte)) return;  // another is attaching: it keeps the name
  lock(fd, F_UNLCK, kPresenceByte);
  if (!lock(fd, F_WRLCK, kPresenceByte)) return;  // others are attached
  struct stat mine {}, named {};
  if (::fstat(fd, &mine) == 0 && ::stat(path, &named) == 0 && mine.st_ino == named.st_ino &&
      mine.st_dev == named.st_dev)
    ::unlink(path);
}

void on_signal(int sig) {
  const int saved = errno;
  for (Slot& s : slots) {
    if (s.state.load(std::memory_order_acquire) != kReady) continue;
    if (s.tree)
      remove_tree_now(s.path);
    else
      detach_segment_now(s.fd, s.path);
  }
  // Then the signal's own action: the process ends by it, as it would have.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(sig, &dfl, nullptr);
  errno = saved;
  ::raise(sig);  // delivered once this handler returns (the signal is blocked in it)
}

// "<what>-<pid>-<start time>-XXXXXX": the pid and start time, false for another name.
bool parse_tree_name(const std::string& n, int& pid, uint64_t& start) {
  const size_t c = n.rfind('-');
  if (c == std::string::npos || c < 4) return false;
  const size_t b = n.rfind('-', c - 1);
  if (b == std::string::npos || b == 0) return false;
  const size_t a = n.rfind('-', b - 1);
  if (a == std::string::npos) return false;
  const std::string p = n.substr(a + 1, b - a - 1), s = n.substr(b + 1, c - b - 1);
  if (p.empty() || s.empty() || p.size() > 9 || s.size() > 19) return false;
  for (char ch : p + s)
    if (ch < '0' || ch > '9') return false;
  pid = std::atoi(p.c_str());
  start = std::strtoull(s.c_str(), nullptr, 10);
  return pid > 0;
}

}  // namespace

std::string user_temp_directory() {
  const uid_t me = ::geteuid();
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec) base = "/tmp";
  const std::string dir = (base / ("hcq-" + std::to_string(me))).string();
  const std::string who = "temporary directory " + dir + ": ";
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw OsError(who + "mkdir", errno);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) throw OsError(who + "lstat", errno);
  if (!S_ISDIR(st.st_mode)) throw InvalidInput(who + "not a directory (a symbolic link?)");
  if (st.st_uid != me || (st.st_mode & 077) != 0)
    throw InvalidInput(who + "it belongs to uid " + std::to_string(st.st_uid) + " with mode " +
                       shm_locks::octal_mode(st.st_mode) +
                       "; hcq uses only a directory of its own user (uid " + std::to_string(me) +
                       ") that others cannot enter (mode 0700)");
  return dir;
}

size_t sweep_temp_trees() {
  const std::string dir = user_temp_directory();
  size_t removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    int pid = 0;
    uint64_t start = 0;
    if (!parse_tree_name(e.path().filename().string(), pid, start)) continue;
    if (SharedSegment::process_start_time(pid) == start) continue;  // its process lives
    std::error_code rm;
    if (fs::remove_all(e.path(), rm) != static_cast<std::uintmax_t>(-1) && !rm) removed++;
  }
  return removed;
}

TempTree::TempTree(const std::string& what) {
  for (char c : what)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-')
      throw InvalidInput("temporary tree '" + what + "': a name is letters, digits and '-'");
  const std::string dir = user_temp_directory();
  sweep_temp_trees();
  std::string tmpl = dir + "/" + what + "-" + std::to_string(::getpid()) + "-" +
                     std::to_string(SharedSegment::process_start_time(::getpid())) + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw OsError("temporary tree " + tmpl + ": mkdtemp", errno);
  path_ = tmpl;
  slot_ = remember(true, -1, path_);
}

TempTree::~TempTree() {
  forget(slot_);
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void cleanup_on_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, s);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      // A signal the process ignores (nohup, a background job's SIGINT) stays ignored.
      if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
      ::sigaction(s, &sa, nullptr);
    }
  });
}

int remember_segment(int fd, const std::string& path) { return remember(false, fd, path); }
void forget_segment(int slot) { forget(slot); }

}  // namespace hcq::os
