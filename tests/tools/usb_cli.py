#!/usr/bin/env python3
"""hcq usb ls, usb bench and reg usb:... as a user runs them, on the emulated machine
(HCQ_EMULATED_USB=1: one ASM2464 with tinygrad's custom firmware on port 2-1, the
register-level RX 7900 XTX behind it), with exact output and exact errors; and on the real
machine, where only the exit status and the shape are known."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from cli_check import Cli  # noqa: E402

cli = Cli(sys.argv[1], "HCQ_EMULATED_USB")
run, expect = cli.run, cli.expect


# The bridge and the GPU after enumeration: BAR0 (VRAM) grown from 256 MiB to 32 GiB through
# Resizable BAR and placed at tinygrad's pref_mem_base (32 GiB), the doorbells after it, the
# registers at tinygrad's mem_base (0x10000000); the link in L0 (XDATA 0xB450 = 0x78).
LS = """\
usb:2-1  add1:0001  custom ASM2464 firmware (emulated)  10000 Mb/s
  firmware  tinygrad's custom firmware
  PCIe link L0 (LTSSM 0x78)
  GPU       04:00.0  1002:744c  class 030000
    BAR0 [0x800000000, 0x1000000000) 32 GiB, 64-bit, prefetchable (resized from 256 MiB)
    BAR2 [0x1000000000, 0x1000200000) 2 MiB, 64-bit, prefetchable
    BAR5 [0x10000000, 0x10100000) 1 MiB, 32-bit, non-prefetchable
"""
expect("hcq usb ls", run(["usb", "ls"]), LS)
ls = json.loads(run(["usb", "ls", "--json"]))
expect("hcq usb ls --json", ls, {"bridges": [{
    "device": "usb:2-1", "port": "2-1", "bus": 2, "devnum": 3, "vendor": "add1", "product": "0001",
    "product_name": "custom ASM2464 firmware (emulated)", "speed": "10000", "firmware": "custom",
    "ltssm": "0x78", "link_up": True,
    "gpu": {"address": "04:00.0", "vendor": "1002", "device": "744c", "class": "030000", "bars": [
        {"index": 0, "address": "0x800000000", "size": 32 << 30, "io": False, "is64": True,
         "prefetchable": True, "resized_from": 256 << 20},
        {"index": 2, "address": "0x1000000000", "size": 2 << 20, "io": False, "is64": True,
         "prefetchable": True, "resized_from": None},
        {"index": 5, "address": "0x10000000", "size": 1 << 20, "io": False, "is64": False,
         "prefetchable": False, "resized_from": None}]},
    "error": None}]})

# The bench: the figures vary, the lines do not.
out = run(["usb", "bench"])
expect("hcq usb bench", re.fullmatch(
    r"usb:2-1 04:00\.0 \(1002:744c\), medians of 200 round trips and 5 rounds of 16 MiB at BAR0:\n"
    r"  config read round trip +[0-9.]+ us\n"
    r"  memory read32 round trip +[0-9.]+ us\n"
    r"  stream read  16 MiB +[0-9.]+ MB/s\n"
    r"  stream write 16 MiB +[0-9.]+ MB/s\n", out) is not None, True)
b = json.loads(run(["usb", "bench", "usb:2-1", "--json"]))
expect("hcq usb bench --json keys", list(b), ["device", "config_read_us", "memory_read32_us",
                                              "stream_read_mb_s", "stream_write_mb_s", "round_trips",
                                              "stream_bytes", "rounds"])
expect("hcq usb bench --json figures", all(b[k] > 0 for k in list(b)[1:5]), True)
expect("hcq usb bench --json device", b["device"], "usb:2-1 04:00.0")

# Registers: placed by the GPU's IP discovery table (GRBM_STATUS at byte 0x8010, where Mesa and
# radeontop read it), read through TLPs, with the fields am/gc_11_0_0.def describes. The GPU is
# not booted: idle, 0.
GRBM_STATUS = """\
usb:2-1 04:00.0 BAR5+0x8010 GRBM_STATUS = 0x0
  ME0PIPE0_CMDFIFO_AVAIL = 0
  SDMA_RQ_PENDING = 0
  ME0PIPE0_CF_RQ_PENDING = 0
  ME0PIPE0_PF_RQ_PENDING = 0
  GDS_DMA_RQ_PENDING = 0
  DB_CLEAN = 0
  CB_CLEAN = 0
  TA_BUSY = 0
  GDS_BUSY = 0
  GE_BUSY_NO_DMA = 0
  SX_BUSY = 0
  GE_BUSY = 0
  SPI_BUSY = 0
  BCI_BUSY = 0
  SC_BUSY = 0
  PA_BUSY = 0
  DB_BUSY = 0
  ANY_ACTIVE = 0
  CP_COHERENCY_BUSY = 0
  CP_BUSY = 0
  CB_BUSY = 0
  GUI_ACTIVE = 0
"""
expect("hcq reg usb: GRBM_STATUS", run(["reg", "usb:2-1", "read", "GRBM_STATUS"]), GRBM_STATUS)
expect("hcq reg usb: a write without --force",
       run(["reg", "usb:2-1", "write", "GRBM_STATUS", "1"], ok=False, status=1),
       "hcq: refusing to write 0x1 to usb:2-1 04:00.0 BAR5+0x8010 GRBM_STATUS without --force "
       "(an MMIO write can hang the GPU or the machine)\n")

# A poke with --force: SCRATCH_REG7 (GC segment 1 at 0xA000 dwords, + 0x2047) takes it.
expect("hcq reg usb: write --force", run(["reg", "usb:2-1", "write", "SCRATCH_REG7", "0x1234", "--force"]),
       "usb:2-1 04:00.0 BAR5+0x3011c SCRATCH_REG7 <- 0x1234 (reads back 0x1234)\n")
expect("hcq reg usb: --json", json.loads(run(["reg", "usb:2-1", "read", "0x3011c", "--json"])),
       {"address": "usb:2-1 04:00.0", "bar": 5, "offset": "0x3011c", "name": "SCRATCH_REG7",
        "value": "0x0", "fields": {"SCRATCH_REG7": 0}})

# Errors: exact, with their exit statuses.
expect("hcq reg usb: no device there", run(["reg", "usb:2-9", "read", "GRBM_STATUS"], ok=False, status=1),
       "hcq: no USB device at usb:2-9 (hcq usb ls lists the ASM2464 bridges)\n")
expect("hcq reg usb: not a bridge (the root hub)", run(["reg", "usb:usb2", "read", "GRBM_STATUS"], ok=False, status=2),
       "hcq: 'usb:usb2' is not a USB device name (usb:<bus>-<port>, e.g. usb:2-1)\n"
       "Run 'hcq reg --help' for usage.\n")
expect("hcq usb bench: no device there", run(["usb", "bench", "usb:3-1"], ok=False, status=1),
       "hcq: no USB device at usb:3-1 (hcq usb ls lists the ASM2464 bridges)\n")
expect("hcq usb without a subcommand", run(["usb"], ok=False, status=2).splitlines()[0],
       "hcq: A subcommand is required")

# The real machine: whatever is plugged in, ls succeeds and --json parses.
real = run(["usb", "ls", "--json"], emulated=False)
expect("real hcq usb ls --json", isinstance(json.loads(real)["bridges"], list), True)

cli.finish("ok: hcq usb ls, usb bench, reg usb:")
