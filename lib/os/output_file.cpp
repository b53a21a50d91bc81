#include "os/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.hpp"

namespace hcq::os {

OutputFile OutputFile::create(const std::string& path, const Rules& rules) {
  if (path.empty()) throw InvalidInput("cannot write a file with an empty name");
  // No O_TRUNC here: whether to truncate is decided after looking at what was opened.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                  rules.mode & 0777);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP)
      throw OsError(path + ": refusing to write through a symbolic link", err);
    throw OsError("cannot create " + path, err);
  }
  OutputFile f;
  f.fd_ = fd;
  f.path_ = path;
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw OsError("cannot stat " + path, errno);
  for (const std::string& input : rules.inputs) {
    struct stat in {};
    if (::stat(input.c_str(), &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino)
      throw InvalidInput(path + ": is the input " + input +
                         " (the command reads it; choose another output)");
  }
  if (S_ISREG(st.st_mode)) {
    if (st.st_uid != ::geteuid())
      throw OsError(path + ": refusing to overwrite a file owned by uid " +
                        std::to_string(st.st_uid) + " (remove it first or choose another name)",
                    EPERM);
    if (st.st_nlink > 1)
      throw OsError(path + ": refusing to overwrite a file with " + std::to_string(st.st_nlink) +
                        " hard links (remove it first or choose another name)",
                    EPERM);
    if (::ftruncate(fd, 0) != 0) throw OsError("cannot truncate " + path, errno);
    // What it held before is gone: its mode narrows to what the new contents want.
    if ((st.st_mode & 0777 & ~rules.mode) != 0 && ::fchmod(fd, st.st_mode & rules.mode & 0777) != 0)
      throw OsError("cannot chmod " + path, errno);
  } else if (S_ISDIR(st.st_mode)) {
    throw OsError(path + " is a directory", EISDIR);
  }
  return f;
}

OutputFile& OutputFile::operator=(OutputFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    written_ = o.written_;
    o.fd_ = -1;
  }
  return *this;
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, size_t size) {
  if (fd_ < 0) throw Error("write to " + (path_.empty() ? std::string("a file") : path_) +
                           " after it was closed");
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd_, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw OsError("write to " + path_ + " failed after " + std::to_string(written_ + done) +
                        " bytes",
                    n < 0 ? errno : EIO);
    done += size_t(n);
  }
  written_ += done;
}

void OutputFile::close() {
  if (fd_ < 0) return;
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR)
    throw OsError("closing " + path_ + " failed after " + std::to_string(written_) + " bytes",
                  errno);
}

}  // namespace hcq::os
