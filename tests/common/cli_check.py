"""What the scripts that check the hcq command line share: running hcq with its emulation
switch (HCQ_EMULATED_PCI, HCQ_EMULATED_USB) set or cleared, and collecting every failure
instead of stopping at the first."""
import os
import subprocess
import sys


class Cli:
    def __init__(self, hcq, switch):
        self.hcq = hcq
        self.switch = switch  # the environment variable that makes hcq use the emulated machine
        self.failures = []

    def run(self, args, emulated=True, ok=True, status=None):
        """`ok`: exit 0 or not (then stderr is returned); `status`: exactly this exit status."""
        env = dict(os.environ)
        env.pop(self.switch, None)
        if emulated:
            env[self.switch] = "1"
        p = subprocess.run([self.hcq] + args, capture_output=True, text=True, env=env)
        if (p.returncode == 0) != ok or status is not None and p.returncode != status:
            self.failures.append(f"hcq {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}")
        return p.stdout if ok else p.stderr

    def expect(self, what, got, want):
        if got != want:
            self.failures.append(f"{what}:\n--- got\n{got}--- want\n{want}")

    def finish(self, summary):
        """Prints every failure and exits 1, or prints `summary`."""
        if self.failures:
            print("\n\n".join(self.failures))
            sys.exit(1)
        print(summary)
