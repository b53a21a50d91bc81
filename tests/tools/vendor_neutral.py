#!/usr/bin/env python3
"""lib/ names no vendor (issue 35 item 4): no identifier in lib/'s code (comments and string
literals aside) carries a vendor's or a vendor block's name. What one vendor's hardware needs
lives in drivers/<vendor>; lib/ has only the mechanisms (index/data pairs, mailbox locks).

usage: vendor_neutral.py LIB_DIR"""
import os
import re
import sys

# Words that belong to one vendor's hardware or kernel driver.
VENDOR = re.compile(r'amdgpu|amdkfd|kfd|nbio|rsmu|smu|psp|gfx\d|navi|nvidia|gpfifo|qmd|kgsl|'
                    r'adreno|msm|pm4|sdma|mmhub|osssys', re.I)
IDENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
# Comments, string and character literals (raw strings are not used in lib/).
NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def main():
    root = sys.argv[1]
    bad = []
    files = 0
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if not name.endswith(('.hpp', '.cpp', '.h')):
                continue
            path = os.path.join(dirpath, name)
            files += 1
            with open(path, encoding='utf-8') as f:
                code = NOISE.sub(lambda m: '\n' * m.group(0).count('\n'), f.read())
            for n, line in enumerate(code.splitlines(), 1):
                if line.lstrip().startswith('#include'):
                    continue
                for ident in IDENT.findall(line):
                    if VENDOR.search(ident):
                        bad.append(f'{os.path.relpath(path, root)}:{n}: {ident}')
    for b in bad:
        print(b)
    print(f'{files} files checked, {len(bad)} vendor names in code')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
