"""kache doctor states the host compiler nvcc's key sees. Under kache's masquerade (a `gcc` link to kache
first on PATH) nvcc's dry run names `gcc`, which is kache; the masquerade runs the next gcc on PATH, and
that one is what the toolchain probe keys (compiler/nvcc/toolchain.hpp, is_masquerade). Doctor once
stated the link's own path as the host compiler."""
import json
import os
import shutil

import kachetest
from kachetest import KacheTestCase


class DoctorUnderMasquerade(KacheTestCase):
    def test_host_compiler_is_the_one_past_kache(self):
        real_gcc = shutil.which("gcc")
        if real_gcc is None:
            self.skipTest("no gcc on PATH")
        masquerade = self.path("masquerade")
        os.makedirs(masquerade)
        os.symlink(kachetest.KACHE, os.path.join(masquerade, "gcc"))
        env = {"PATH": masquerade + os.pathsep + self.env["PATH"]}
        r = self.kache(["doctor", "--json"], env=env, check=False)
        rows = {f'{row["section"]}.{row["name"]}': row for row in json.loads(r.stdout)["rows"]}
        host = rows["toolchain.host-compiler"]
        self.assertEqual(host["status"], "ok", host)
        self.assertNotIn(masquerade, host["value"])
        self.assertTrue(host["value"].endswith(" at " + real_gcc), host["value"])


if __name__ == "__main__":
    kachetest.main()
