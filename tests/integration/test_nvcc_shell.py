"""Issue 35 item 5: what nvcc's /bin/sh reads is no hidden input.

nvcc runs its steps through /bin/sh with each argument in double quotes, so `$VAR`, `$(cmd)` and
backquotes in a -D value, an -Xcompiler value, an -I path or a file name are expanded when the step
runs (measured with nvcc 13: --dryrun prints `-D "WHO=\\"$VAR\\""`). The variable was not keyed, so a
hit after VAR changed served the old value. Such a command now runs unchanged
(passthrough.shell-expansion), and the program prints what the plain nvcc's prints."""
import os
import subprocess

import kachetest
from kachetest import KacheTestCase

SOURCE = """#include <cstdio>
#define TEXT2(x) #x
#define TEXT(x) TEXT2(x)
int main() { std::printf("%s\\n", TEXT(WHO)); return 0; }
"""
OLD = 1_600_000_000 * 10**9


class NvccShellExpansion(KacheTestCase):
    def program_output(self, tool, define, value):
        args = ["-c", "w.cu", "-o", f"{tool}.o"] + define
        env = {"VAR": value}
        if tool == "kache":
            self.kache(["nvcc"] + args, env=env)
        else:
            self.nvcc(args, env=env)
        self.nvcc([f"{tool}.o", "-o", f"{tool}.exe"])
        return subprocess.run([self.path(f"{tool}.exe")], capture_output=True, text=True, check=True).stdout

    def test_changed_variable_is_not_served_stale(self):
        self.write("w.cu", SOURCE, mtime_ns=OLD)
        cases = {
            "dollar": ["-DWHO=$VAR"],
            "braces": ["-DWHO=${VAR}"],
            "command": ["-DWHO=$(echo $VAR)"],
            "backquote": ["-DWHO=`echo $VAR`"],
            "xcompiler": ["-Xcompiler", "-DWHO=$VAR"],
        }
        for name, define in cases.items():
            with self.subTest(case=name):
                self.zero()
                for value in ("first", "second"):
                    served = self.program_output("kache", define, value)
                    self.assertEqual(served, self.program_output("plain", define, value))
                    self.assertEqual(served, value + "\n")
                s = self.stats()
                self.assertEqual((s["hits"], s["passthrough_reasons"]), (0, {"shell-expansion": 2}), s)


if __name__ == "__main__":
    kachetest.main()
