// Files hcq writes for the user (captures, traces): opened without following a symlink, never
// silently truncating someone else's file, and every write and the final close checked, so a
// full disk or a dead pipe is an error and not a success with the data lost.
//
// Overwrite rule: a symlink as the last path component is refused (O_NOFOLLOW); an existing
// regular file is truncated only when the caller's effective user owns it and it has one link;
// an existing non-regular file (a character device such as /dev/null, a FIFO) is written as
// it is, without truncation.
//
// Thread safety: one OutputFile may not be used from several threads at once; the caller
// serialises (the capture writer holds its lock around every write).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hcq::os {

class OutputFile {
 public:
  struct Rules {
    // The mode of a file made here (less the umask); an existing file this truncates loses
    // the bits `mode` lacks. Captures and traces hold memory contents: 0600.
    mode_t mode = 0644;
    // Files the command reads: an output that is one of them (same device and inode, by any
    // name or link) is refused before anything is truncated.
    std::vector<std::string> inputs = {};
  };
  OutputFile() = default;
  // Throws OsError naming the path (and, for a refused file, why) when it cannot be opened;
  // InvalidInput "PATH: is the input PATH2 (the command reads it; choose another output)".
  static OutputFile create(const std::string& path) { return create(path, Rules{}); }
  static OutputFile create(const std::string& path, const Rules& rules);
  OutputFile(OutputFile&& o) noexcept { *this = std::move(o); }
  OutputFile& operator=(OutputFile&& o) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // closes without reporting: call close() to learn whether the data landed

  // Writes all of `size` bytes (retrying short writes and EINTR). Throws OsError naming the
  // path, the bytes written so far and the errno (ENOSPC, EPIPE ...).
  void write(const void* data, size_t size);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Closes and reports a failed close (NFS and some file systems report ENOSPC only there).
  void close();

  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return written_; }

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t written_ = 0;
};

}  // namespace hcq::os
