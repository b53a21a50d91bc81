#!/usr/bin/env python3
"""Write the hcq ir3 container (docs/ir3-container.md) for the demo kernels of kernels.cl.

usage: make_ir3.py OUTPUT.ir3 FAMILY      (FAMILY: 6 for a6xx, 7 for a7xx, 0 for any)

The containers are STAND-INS. There is no ir3 compiler in the build environment (Mesa's ir3 is
not packaged as a tool in Debian), so every kernel's code is the smallest valid ir3 program, a
single `end` instruction, which returns at once without touching memory. Only the argument
metadata is real: it is the OpenCL C kernarg layout of kernels.cl (pointers 8 bytes, uint and
float 4 bytes at their natural alignment), the offsets kernels/cpu_kernels.cpp reads. The
emulated Adreno runs the CPU implementations by kernel name, so these kernels do their work
there; a real GPU would run `end` and do nothing.

One more kernel, `vector_add_uav`, is Adreno-only: vector_add with the same arguments, whose
three buffers the shader reaches through UAV (IBO) descriptors, as ir3 reaches storage buffers
(ldib/stib), rather than through the addresses in the constant file. Its record binds UAV 0, 1
and 2 to arguments a, b and c as 32-bit elements, so the file is version 2 (version 1 has no
UAV bindings); the CPU implementation reads and writes only through the UAV addresses the
emulated GPU decodes from the descriptors.

The `end` encoding: Mesa src/freedreno/isa/ir3-cat0.xml defines `end` as a cat0 instruction
(bits 63..61 = 000) with OPC (bits 58..55) = 0110 and every other field zero, that is
6 << 55 = 0x0300000000000000; Mesa's disassembler test src/freedreno/ir3/tests/disasm.c has
the same word: INSTR_6XX(03000000_00000000, "end"). Stored as two little-endian dwords, low
dword first: 0x00000000, 0x03000000.
"""
import os
import struct
import sys

MAGIC = b'HCQIR3\0\0'
VERSION_PLAIN, VERSION_UAVS = 1, 2  # version 2: UAV bindings after the arguments
HEADER_BYTES = 24
NO_REGID = 0xfc  # regid(63, 0): the shader reads no workgroup / local id register

END = 0x0300000000000000
END_DWORDS = [END & 0xffffffff, END >> 32]

BUFFER, VALUE = 0, 1
READ_WRITE, READ_ONLY = 0, 1
U32 = 0  # UAV element format: 32-bit (FMT6_32_UINT)

VECTOR_ADD_ARGS = [('a', 0, 8, BUFFER, READ_ONLY), ('b', 8, 8, BUFFER, READ_ONLY),
                   ('c', 16, 8, BUFFER, READ_WRITE), ('n', 24, 4, VALUE, READ_WRITE),
                   ('block', 28, 4, VALUE, READ_WRITE)]

# (name, [(argument, offset, size, kind, access)], [(argument index, format)] UAVs) in kernels.cl
# order; offsets as kernels/cpu_kernels.cpp reads them.
KERNELS = [
    ('empty', [], []),
    ('fill_u32', [('dst', 0, 8, BUFFER, READ_WRITE), ('value', 8, 4, VALUE, READ_WRITE),
                  ('n', 12, 4, VALUE, READ_WRITE), ('block', 16, 4, VALUE, READ_WRITE)], []),
    ('vector_add', VECTOR_ADD_ARGS, []),
    ('scale_add', [('x', 0, 8, BUFFER, READ_WRITE), ('a', 8, 4, VALUE, READ_WRITE),
                   ('b', 12, 4, VALUE, READ_WRITE), ('n', 16, 4, VALUE, READ_WRITE),
                   ('block', 20, 4, VALUE, READ_WRITE)], []),
    ('spin_until', [('flag', 0, 8, BUFFER, READ_WRITE)], []),
    ('vector_add_uav', VECTOR_ADD_ARGS, [(0, U32), (1, U32), (2, U32)]),
]


def round_up(v, a):
    return (v + a - 1) // a * a


def padded(b):
    return b + b'\0' * (round_up(len(b), 4) - len(b))


def kernel_record(name, args, uavs):
    kernarg = max((off + size for _, off, size, _, _ in args), default=0)
    args_bytes = round_up(kernarg, 16)
    const_dwords = round_up(args_bytes // 4, 4)
    name_b = name.encode('utf-8')
    fixed = struct.pack(
        '<21I',
        len(name_b), len(END_DWORDS), 0, len(args),  # name, instructions, immediates, args
        2, 0, 0, 64,          # full_regs, half_regs, branch_stack, threadsize
        0, 0, 0,              # local_size: any
        const_dwords, 0, args_bytes,  # const_dwords, args_offset, args_bytes
        0, len(uavs), 0, 0,   # immediates_offset, uav_count, local and private memory
        NO_REGID, NO_REGID, 0)  # workgroup id regid, local id regid, flags
    body = padded(name_b) + struct.pack('<%dI' % len(END_DWORDS), *END_DWORDS)
    for arg, off, size, kind, access in args:
        arg_b = arg.encode('utf-8')
        body += struct.pack('<IIBBBB', off, size, kind, access, len(arg_b), 0) + padded(arg_b)
    for arg_index, fmt in uavs:  # version 2: argument index, format, 3 reserved bytes
        body += struct.pack('<IB3x', arg_index, fmt)
    record = fixed + body
    return struct.pack('<I', 4 + len(record)) + record


def main(argv):
    if len(argv) != 3 or argv[2] not in ('0', '6', '7'):
        sys.stderr.write(__doc__)
        return 2
    out_path, family = argv[1], int(argv[2])
    version = VERSION_UAVS if any(uavs for _, _, uavs in KERNELS) else VERSION_PLAIN
    data = MAGIC + struct.pack('<IIII', version, family, len(KERNELS), HEADER_BYTES)
    for name, args, uavs in KERNELS:
        data += kernel_record(name, args, uavs)
    tmp = out_path + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(data)
    os.replace(tmp, out_path)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
