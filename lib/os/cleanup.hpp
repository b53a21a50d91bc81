// What a process leaves on the machine, and how it goes however the process ends: temporary
// trees under one per-user directory, shared-memory segments, and the SIGINT/SIGTERM/SIGHUP
// handler that removes both before the signal ends the process as it would have.
//
// A clean exit removes everything (destructors). A signal the handler catches removes this
// process's temporary trees and the segments it is the last one attached to. What a SIGKILL
// leaves is reclaimed by the next process: temporary trees of processes that are gone are
// removed when a TempTree is made, and segments nobody holds when the first SharedSegment of a
// process is made (os/shm.hpp).
//
// Thread safety: TempTree's constructor and destructor, sweep_temp_trees and
// sweep_shared_segments may be called from several threads at once; cleanup_on_signals once per
// process, from any thread.
#pragma once

#include <cstddef>
#include <string>

namespace hcq::os {

// The per-user directory temporary trees go in: $TMPDIR/hcq-<euid> (TMPDIR unset: /tmp), made
// 0700. Errors (OsError / InvalidInput):
//   "temporary directory /tmp/hcq-0: it belongs to uid 1001 with mode 0777; hcq uses only a
//    directory of its own user (uid 0) that others cannot enter (mode 0700)"
//   "temporary directory /tmp/hcq-0: not a directory (a symbolic link?)"
std::string user_temp_directory();

// A temporary directory of this process: <user_temp_directory()>/<what>-<pid>-<start time>-XXXXXX
// (`what` is letters, digits and '-'). The destructor removes it with all it holds.
class TempTree {
 public:
  explicit TempTree(const std::string& what);
  ~TempTree();
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int slot_ = -1;  // in the signal handler's list
};

// Removes the trees in user_temp_directory() whose process (pid and start time in the name)
// is gone. Returns how many.
size_t sweep_temp_trees();

// Removes the hcq shared-memory segments (/dev/shm/hcq*) of this user that no process is
// attached to: left by processes killed before they could detach. Returns how many.
size_t sweep_shared_segments();

// Installs the SIGINT, SIGTERM and SIGHUP handler: it removes this process's temporary trees
// and the segments it alone holds, then lets the signal end the process (default action).
void cleanup_on_signals();

// For os/shm.cpp: a segment this process is attached to or attaching (from its shm_open on),
// which the handler detaches from as the last one out would (removing the name when nobody
// else holds it). Returns a slot for
// forget_segment, or -1 when the list is full (the next process's sweep reclaims it then).
int remember_segment(int fd, const std::string& path);
void forget_segment(int slot);

}  // namespace hcq::os
