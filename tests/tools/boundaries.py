#!/usr/bin/env python3
"""The build boundaries of drivers/ (issue 16): per vendor, the driver and the emulator each
depend on the descriptions only, never on each other; the devices layer (factories) and the
registry sit above both. Every "..." include of a layer's sources and of the headers they
reach must lie in that layer or one below it.

usage: boundaries.py DRIVERS_DIR [LAYER FILE...]... (layers: desc, driver, emu, devices,
registry; a header takes the layer of its .cpp, or of its own entry; any other header the
highest layer it includes)"""
import os
import re
import sys

BELOW = {'desc': {'desc'}, 'driver': {'desc', 'driver'}, 'emu': {'desc', 'emu'},
         'devices': {'desc', 'driver', 'emu', 'devices'},
         'registry': {'desc', 'driver', 'emu', 'devices', 'registry'}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    root = os.path.realpath(sys.argv[1])
    layer_of = {}
    layer = None
    for arg in sys.argv[2:]:
        if arg in BELOW:
            layer = arg
            continue
        rel = os.path.relpath(os.path.realpath(arg), root)
        layer_of[rel] = layer
        layer_of.setdefault(os.path.splitext(rel)[0] + '.hpp', layer)

    def includes(rel):
        with open(os.path.join(root, rel), encoding='utf-8') as f:
            text = f.read()
        # Only files of drivers/ (lib/'s "core/...", "os/...", "emu/..." lie below every layer).
        return [i for i in INCLUDE.findall(text)
                if os.path.isfile(os.path.join(root, i)) and not i.endswith('.def')]

    def header_layer(rel, seen=()):
        if rel in layer_of:
            return layer_of[rel]
        layers = {header_layer(i, seen + (rel,)) for i in includes(rel) if i not in seen}
        for top in ('registry', 'devices', 'driver', 'emu'):  # the highest; driver+emu: devices
            if top in layers:
                return 'devices' if {'driver', 'emu'} <= layers else top
        return 'desc'

    bad = []
    for rel, layer in sorted(layer_of.items()):
        if not os.path.isfile(os.path.join(root, rel)):
            continue
        todo, seen = [rel], {rel}
        while todo:
            f = todo.pop()
            for i in includes(f):
                if i in seen:
                    continue
                seen.add(i)
                todo.append(i)
                if header_layer(i) not in BELOW[layer]:
                    bad.append(f'{rel} ({layer}) reaches {i} ({header_layer(i)}) through {f}')
    for b in bad:
        print(b)
    print(f'{len(layer_of)} files checked, {len(bad)} crossings')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
