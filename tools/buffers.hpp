// The buffers a full capture (HCQ_CAPTURE=path,full) recorded, for `hcq dump --buffers` (the
// list) and `hcq dump --buffer ADDR` (one buffer's contents at a submission). Built in one pass
// over the capture's records, holding one record's bytes at a time; the contents are read
// again in a second pass (for_each_piece).
//
// A buffer is what one memory record, or a run of consecutive pieces, covers: a buffer over
// kMemoryPieceBytes is written as pieces of that size at consecutive addresses, one record
// each, next to each other in the file with the same device, flags and timeline; they are
// joined again here. Distinct buffers differ in device, start, size, kind or in the flags a
// buffer keeps (executable, signals, user, cpu-written): an address reused for another
// allocation is another buffer. (Two buffers of whole multiples of kMemoryPieceBytes that lie
// next to each other and were recorded in the same pass read as one: the format does not mark
// a piece as one.)
//
// Thread safety: the functions keep no state; different indexes may be used from several
// threads at once, one index from several threads only to read it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/capture.hpp"

namespace hcq::tools {

// The flags that belong to a buffer rather than to one record of it (kMemorySettled does not).
inline constexpr uint32_t kBufferFlags = capture::kMemoryExecutable | capture::kMemorySignals |
                                         capture::kMemoryUser | capture::kMemoryWritten;

struct RecordedBuffer {
  uint32_t device = 0;
  uint64_t start = 0, size = 0;  // [start, start + size)
  MemoryKind kind = MemoryKind::Device;
  uint32_t flags = 0;  // of kBufferFlags
  // One recording of its contents: its first memory record (counting the file's memory records
  // from 0), how many pieces, and how many submission records came before it (the submission
  // it precedes is the index's submissions[that], none when it is past the last: at the end).
  struct Recording {
    uint64_t first_record = 0;
    uint32_t pieces = 1;
    uint64_t submissions_before = 0;
  };
  std::vector<Recording> recordings;  // in file order
};

struct BufferIndex {
  std::map<uint32_t, capture::DeviceRecord> devices;
  std::vector<RecordedBuffer> buffers;  // by device, start, size, kind, flags
  std::vector<uint64_t> submissions;    // each submission record's sequence, in file order
  uint64_t memory_records = 0;
  // The sequence of the submission a recording precedes; nullopt: at the end.
  std::optional<uint64_t> before(const RecordedBuffer::Recording& r) const {
    if (r.submissions_before < submissions.size()) return submissions[r.submissions_before];
    return std::nullopt;
  }
};

// Reads every record `r` gives. Throws the Reader's errors, and InvalidInput (naming `name`)
// for a memory record of a device no record declared, or one whose end passes 2^64.
// `piece_bytes`: the writer's piece size (the fuzz target makes it small, to reach the joining
// with small inputs).
BufferIndex index_buffers(capture::Reader& r, const std::string& name,
                          uint64_t piece_bytes = capture::kMemoryPieceBytes);

// "flags" as `hcq dump --buffers` prints them: "executable,signals,user,cpu-written" (those
// set), "-" when none.
std::vector<std::string> flag_names(uint32_t flags);

// What --buffer ADDR [--device D] [--at N] names: a buffer and the recording to write.
struct BufferChoice {
  size_t buffer = 0;     // in index.buffers
  size_t recording = 0;  // in its recordings
};
// The buffer holding `address` (on `device`, needed when several devices recorded one there),
// at its latest recording before submission `at` (the first submission record of that
// sequence) or at its last when `at` is none. When several buffers of one device hold the
// address (an address reused), the one recorded last by then. Throws InvalidInput with an exact
// message ("dump: NAME ..."): no buffer contents at all, none at the address, buffers on
// several devices there, no submission `at`, a buffer first recorded after `at`.
BufferChoice choose_buffer(const BufferIndex& index, const std::string& name, uint64_t address,
                           std::optional<uint32_t> device, std::optional<uint64_t> at);

// Reads the capture again (`r`, fresh) and hands `f` the pieces of recording `rec`, in order.
// Throws InvalidInput when the file no longer holds them as the index saw (it changed between
// the passes).
void for_each_piece(capture::Reader& r, const std::string& name, const RecordedBuffer& buffer,
                    const RecordedBuffer::Recording& rec,
                    const std::function<void(std::span<const uint8_t>)>& f);

}  // namespace hcq::tools
