// The AMDGPU code object metadata: the NT_AMDGPU_METADATA note's MessagePack map, read into
// what hcq uses of it. Keys and their meaning: LLVM docs/AMDGPUUsage.rst ("Code Object V3+
// Metadata"). The note itself is found by CodeObject::parse (code_object.cpp), which also
// checks the values against the kernel descriptors.
//
// Threads: parse_metadata keeps no state between calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/driver.hpp"

namespace hcq::amd {

// One entry of amdhsa.kernels; a value absent from the note is nullopt (or empty).
struct KernelMetadata {
  std::string name;    // .name (required)
  std::string symbol;  // .symbol, else "<name>.kd"
  std::optional<uint32_t> kernarg_size;  // .kernarg_segment_size
  std::optional<uint32_t> kernarg_align;  // .kernarg_segment_align
  std::optional<uint32_t> wave_size;      // .wavefront_size
  std::optional<uint32_t> lds;            // .group_segment_fixed_size
  std::optional<uint32_t> scratch;        // .private_segment_fixed_size
  std::vector<KernelArg> args;            // .args, in order
};

struct Metadata {
  std::string target;  // amdhsa.target ("amdgcn-amd-amdhsa--gfx1100"); empty when absent
  std::vector<KernelMetadata> kernels;  // amdhsa.kernels
};

// Reads the note's descriptor. Throws hcq::InvalidInput "AMDGPU code object: ..." for
// malformed MessagePack ("malformed NT_AMDGPU_METADATA msgpack: <what the reader says>"), a
// value of the wrong type or range (naming the kernel, argument and key), a missing required
// key, or an argument kind hcq cannot fill.
Metadata parse_metadata(std::span<const std::byte> note_desc);

}  // namespace hcq::amd
