// What os/shm.cpp (SharedSegment) and os/cleanup.cpp (the signal handler that detaches as the
// last one out) share about a segment's locks: which bytes, and how one is taken. One place, so
// the handler cannot drift from the segment's own rule.
//
// Thread safety: lock() is one fcntl(2), async-signal-safe; octal_mode is a pure function
// (not for signal handlers: it builds a std::string).
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstdio>
#include <string>

namespace hcq::os::shm_locks {

// Byte 0: held exclusively while attaching or detaching. Byte 1: held shared by every process
// attached (open-file-description locks, Linux 3.15+: per open file, dropped when it closes).
inline constexpr off_t kAttachByte = 0, kPresenceByte = 1;

// One byte's lock of `type` (F_RDLCK, F_WRLCK, F_UNLCK) at `at`; `wait`: until it is free.
// False with errno set when it is not taken (EAGAIN or EACCES: another holds it).
inline bool lock(int fd, short type, off_t at, bool wait = false) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = at;
  l.l_len = 1;
  return ::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &l) == 0;
}

// A file mode's permission bits as ls shows them in octal: "0600".
inline std::string octal_mode(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", unsigned(m & 07777));
  return b;
}

}  // namespace hcq::os::shm_locks
