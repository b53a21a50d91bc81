// The AMDGPU code object metadata map, read from its MessagePack tree (common/msgpack.hpp).
// Keys, value kinds and access qualifiers: LLVM docs/AMDGPUUsage.rst ("Code Object V3+
// Metadata").
#include "amd/metadata.hpp"

#include <limits>
#include <string_view>

#include "common/msgpack.hpp"
#include "core/error.hpp"

namespace hcq::amd {
namespace {

using msgpack::Value;

[[noreturn]] void fail(const std::string& what) {
  throw InvalidInput("AMDGPU code object: " + what);
}

// Typed access to the tree with messages that say which field is wrong.
std::optional<uint32_t> md_u32(const Value& m, std::string_view key, const std::string& where) {
  const Value* v = m.get(key);
  if (!v) return std::nullopt;
  uint64_t u;
  if (v->type == Value::Type::UInt)
    u = v->u;
  else if (v->type == Value::Type::Int && v->i >= 0)
    u = static_cast<uint64_t>(v->i);
  else
    fail("metadata " + where + " " + std::string(key) + " is not an unsigned integer");
  if (u > std::numeric_limits<uint32_t>::max())
    fail("metadata " + where + " " + std::string(key) + " = " + std::to_string(u) +
         " does not fit in 32 bits");
  return static_cast<uint32_t>(u);
}

const std::string* md_str(const Value& m, std::string_view key, const std::string& where) {
  const Value* v = m.get(key);
  if (!v) return nullptr;
  if (v->type != Value::Type::Str)
    fail("metadata " + where + " " + std::string(key) + " is not a string");
  return &v->s;
}

KernelArg read_arg(const Value& a, const std::string& where) {
  if (a.type != Value::Type::Map) fail("metadata " + where + " is not a map");
  KernelArg ka;
  const auto off = md_u32(a, ".offset", where);
  const auto size = md_u32(a, ".size", where);
  const std::string* kind = md_str(a, ".value_kind", where);
  if (!off || !size || !kind) fail("metadata " + where + " lacks .offset, .size or .value_kind");
  ka.offset = *off;
  ka.size = *size;
  if (auto* n = md_str(a, ".name", where)) ka.name = *n;
  if (*kind == "global_buffer") {
    ka.kind = KernelArg::Kind::Buffer;
    // .actual_access (LLVM, from readonly/writeonly attributes) or .is_const (OpenCL const
    // pointers).
    const Value* acc = a.get(".actual_access");
    const Value* is_const = a.get(".is_const");
    if (acc && acc->type == Value::Type::Str && acc->s == "read_only")
      ka.access = KernelArg::Access::ReadOnly;
    else if (acc && acc->type == Value::Type::Str && acc->s == "write_only")
      ka.access = KernelArg::Access::WriteOnly;
    else if (is_const && is_const->type == Value::Type::Bool && is_const->b)
      ka.access = KernelArg::Access::ReadOnly;
  } else if (*kind == "by_value") {
    ka.kind = KernelArg::Kind::Value;
  } else if (kind->starts_with("hidden_")) {
    ka.kind = KernelArg::Kind::Hidden;
  } else {
    // dynamic_shared_pointer, image, sampler, pipe, queue: hcq cannot fill these.
    fail("metadata " + where + " has unsupported .value_kind '" + *kind + "'");
  }
  return ka;
}

KernelMetadata read_kernel(const Value& k, size_t index) {
  std::string where = "kernel #" + std::to_string(index);
  if (k.type != Value::Type::Map) fail("metadata " + where + " is not a map");
  KernelMetadata km;
  if (auto* n = md_str(k, ".name", where)) km.name = *n;
  if (km.name.empty()) fail("metadata " + where + " has no .name");
  where = "kernel '" + km.name + "'";
  if (auto* s = md_str(k, ".symbol", where)) km.symbol = *s;
  if (km.symbol.empty()) km.symbol = km.name + ".kd";
  km.kernarg_size = md_u32(k, ".kernarg_segment_size", where);
  km.kernarg_align = md_u32(k, ".kernarg_segment_align", where);
  km.wave_size = md_u32(k, ".wavefront_size", where);
  km.lds = md_u32(k, ".group_segment_fixed_size", where);
  km.scratch = md_u32(k, ".private_segment_fixed_size", where);
  if (const Value* args = k.get(".args")) {
    if (args->type != Value::Type::Array) fail("metadata " + where + " .args is not an array");
    for (size_t j = 0; j < args->arr.size(); ++j)
      km.args.push_back(read_arg(args->arr[j], where + " argument #" + std::to_string(j)));
  }
  return km;
}

}  // namespace

Metadata parse_metadata(std::span<const std::byte> note_desc) {
  Value root;
  try {
    root = msgpack::parse(note_desc);
  } catch (const InvalidInput& e) {
    fail(std::string("malformed NT_AMDGPU_METADATA ") + e.what());  // "... msgpack: <what>"
  }
  if (root.type != Value::Type::Map) fail("metadata note is not a msgpack map");
  Metadata md;
  if (auto* t = md_str(root, "amdhsa.target", "")) md.target = *t;
  const Value* ks = root.get("amdhsa.kernels");
  if (!ks || ks->type != Value::Type::Array) fail("metadata has no amdhsa.kernels array");
  for (size_t i = 0; i < ks->arr.size(); ++i) md.kernels.push_back(read_kernel(ks->arr[i], i));
  return md;
}

}  // namespace hcq::amd
