"""kache doctor: the toolchain, driver, cache and configuration facts, as ok/warn/fail rows (spec 004).

On this machine (CUDA 13, gcc 12, no driver) every row is ok or warn and the exit status is 0; a fake
toolkit directory (a copy of the real nvcc with its own nvcc.profile and a crt/host_config.h whose bound
is below the host gcc) gives a fail row naming -ccbin, and exit status 1. The rocm.* rows state what
kache hipcc runs (hipcc, its clang, the device libraries, CMake's hip-lang layout); without hipcc they
are one ok row, and a hipcc that hangs is a warn row after --probe-timeout."""
import json
import os
import re
import shutil
import subprocess

import kachetest
from kachetest import KacheTestCase, nvcc_home


HIPCC = shutil.which("hipcc")


def host_gcc_major():
    r = subprocess.run(["gcc", "-dumpversion"], capture_output=True, text=True, check=True)
    return int(r.stdout.strip().split(".")[0])


class Doctor(KacheTestCase):
    def doctor(self, args=(), env=None, code=0):
        r = self.kache(["doctor", "--json"] + list(args), env=env, check=False)
        self.assertEqual(r.returncode, code, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["schema"], "kache-doctor-1")
        return {f'{row["section"]}.{row["name"]}': row for row in out["rows"]}, out

    def test_this_machine(self):
        rows, out = self.doctor()
        self.assertEqual(out["fails"], 0, json.dumps(out, indent=1))
        nvcc = rows["toolchain.nvcc"]
        self.assertEqual(nvcc["status"], "ok")
        release = re.search(r"release (\d+\.\d+)", subprocess.run([kachetest.NVCC, "--version"], capture_output=True,
                                                                  text=True).stdout).group(1)
        self.assertIn(f"CUDA {release}", nvcc["value"])
        gcc = host_gcc_major()
        self.assertIn(f"gcc {gcc}.", rows["toolchain.host-compiler"]["value"])
        bound = rows["toolchain.host-compiler-bound"]
        self.assertEqual(bound["status"], "ok", bound)
        self.assertIn("host_config.h", bound["value"])
        self.assertIn("glibc", rows["toolchain.glibc"]["value"])
        self.assertNotEqual(rows["driver.driver"]["status"], "fail")
        if not any(os.path.exists(os.path.join(d, "libcuda.so.1"))
                   for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
            self.assertTrue(rows["driver.driver"]["value"].startswith("none"), rows["driver.driver"])
        self.assertEqual(rows["cache.writable"]["status"], "ok")
        self.assertIn(self.cache, rows["cache.dir"]["value"])
        self.assertIn("racy-file margin", rows["cache.filesystem"]["value"])

    def test_text_output(self):
        r = self.kache(["doctor"])
        self.assertRegex(r.stdout, r"ok\s+toolchain\.host-compiler-bound\s+gcc \d+ <= \d+")
        self.assertIn("0 fail", r.stdout)

    def fake_toolkit(self, gnu_bound):
        top = self.path("fake-cuda")
        os.makedirs(os.path.join(top, "bin"))
        os.makedirs(os.path.join(top, "include", "crt"))
        shutil.copy(os.path.join(nvcc_home(), "nvcc"), os.path.join(top, "bin", "nvcc"))
        with open(os.path.join(top, "bin", "nvcc.profile"), "w") as f:
            f.write('TOP = $(_HERE_)/..\nPATH += $(_HERE_):\nINCLUDES += "-I$(TOP)/include" $(_SPACE_)\n')
        with open(os.path.join(top, "include", "crt", "host_config.h"), "w") as f:
            f.write(f"#if defined(__GNUC__)\n#if __GNUC__ > {gnu_bound}\n"
                    f"#error -- unsupported GNU version! gcc versions later than {gnu_bound} are not supported!\n"
                    "#endif\n#endif\n")
        return os.path.join(top, "bin", "nvcc")

    def test_host_compiler_past_the_bound_fails(self):
        gcc = host_gcc_major()
        nvcc = self.fake_toolkit(gcc - 1)
        rows, out = self.doctor(["--nvcc", nvcc], code=1)
        bound = rows["toolchain.host-compiler-bound"]
        self.assertEqual(bound["status"], "fail", bound)
        self.assertIn(f"gcc {gcc} is newer than gcc {gcc - 1}", bound["message"])
        self.assertIn("-ccbin", bound["fix"])
        r = self.kache(["doctor", "--nvcc", nvcc], check=False)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stdout, r"fail\s+toolchain\.host-compiler-bound")
        self.assertIn("fix: pass -ccbin", r.stdout)
        # The same toolkit with a bound the host gcc meets: no fail.
        shutil.rmtree(self.path("fake-cuda"))
        nvcc = self.fake_toolkit(gcc)
        rows, _ = self.doctor(["--nvcc", nvcc])
        self.assertEqual(rows["toolchain.host-compiler-bound"]["status"], "ok")

    def test_settings_that_make_compiles_pass_through(self):
        rows, out = self.doctor(env={"KACHE_DISABLE": "1", "NVCC_APPEND_FLAGS": "-G"})
        self.assertEqual(rows["config.disable"]["status"], "warn")
        self.assertIn("KACHE_DISABLE", rows["config.disable"]["fix"])
        flags = rows["config.nvcc-env-flags"]
        self.assertEqual(flags["status"], "warn")
        self.assertIn("-G", flags["value"])
        self.assertIn("passes through", flags["message"])
        self.assertEqual(out["fails"], 0)
        # Flags by name only: a define's value may be a token, and doctor's rows go into bug reports.
        rows, _ = self.doctor(env={"NVCC_PREPEND_FLAGS": "-DAPI_KEY=t1secret -G"})
        self.assertIn("-DAPI_KEY", rows["config.nvcc-env-flags"]["value"])
        self.assertNotIn("t1secret", json.dumps(rows))
        rows, _ = self.doctor(env={"DEPENDENCIES_OUTPUT": "x.d"})
        self.assertEqual(rows["config.environment"]["status"], "warn")

    def fake_driver(self, version):
        """A libcuda.so.1 whose cuDriverGetVersion answers `version` (the CUDA API version, 12040 = 12.4)."""
        d = self.path(f"driver-{version}")
        os.makedirs(d)
        src = os.path.join(d, "cuda.c")
        with open(src, "w") as f:
            f.write(f"int cuDriverGetVersion(int* v) {{ *v = {version}; return 0; }}\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", os.path.join(d, "libcuda.so.1"), src], check=True)
        return {"LD_LIBRARY_PATH": d}

    def test_driver_against_the_toolkit_floor(self):
        rows, _ = self.doctor()
        major, minor = re.search(r"CUDA (\d+)\.(\d+)", rows["toolchain.nvcc"]["value"]).groups()
        major = int(major)
        rows, _ = self.doctor(env=self.fake_driver((major - 1) * 1000 + 40), code=1)
        driver = rows["driver.driver"]
        self.assertEqual(driver["status"], "fail", driver)
        self.assertIn(f"need a driver for CUDA >= {major}.0, and this machine has {major - 1}.4", driver["message"])
        self.assertIn("install an NVIDIA driver", driver["fix"])
        rows, out = self.doctor(env=self.fake_driver(major * 1000 + int(minor) * 10))
        self.assertEqual(rows["driver.driver"]["status"], "ok", rows["driver.driver"])
        self.assertEqual(out["fails"], 0)
        # A toolkit newer than the driver within one major: its PTX cannot be JIT-compiled (a warning).
        newer = self.path("newer-nvcc")
        with open(newer, "w") as f:
            f.write("#!/bin/sh\n"
                    f'if [ "$1" = --version ]; then echo "Cuda compilation tools, release {major}.9, V{major}.9.1"; exit 0; fi\n'
                    f'exec {kachetest.NVCC} "$@"\n')
        os.chmod(newer, 0o755)
        rows, out = self.doctor(["--nvcc", newer], env=self.fake_driver(major * 1000 + 10))
        driver = rows["driver.driver"]
        self.assertEqual(driver["status"], "warn", driver)
        self.assertIn(f"PTX embedded by CUDA {major}.9 cannot be JIT-compiled by this driver ({major}.1)", driver["message"])
        self.assertEqual(out["fails"], 0)

    def test_missing_nvcc_fails(self):
        rows, _ = self.doctor(["--nvcc", self.path("no-such-nvcc")], code=1)
        self.assertEqual(rows["toolchain.nvcc"]["status"], "fail")

    def test_c_and_cxx_user_without_nvcc_passes(self):
        # No nvcc on PATH, gcc there: nothing in use is broken.
        bin_dir = self.path("bin")
        os.makedirs(bin_dir)
        os.symlink(shutil.which("gcc"), os.path.join(bin_dir, "gcc"))
        rows, out = self.doctor(env={"PATH": bin_dir})
        self.assertEqual(rows["toolchain.nvcc"]["status"], "warn", rows["toolchain.nvcc"])
        self.assertEqual(rows["toolchain.c-compilers"]["value"], "gcc")
        self.assertEqual(out["fails"], 0)

    def test_wrapper_compilers_on_path(self):
        # The H100 host's /opt/gcc/bin/gcc: a row says what it is read as; one kache cannot read says why,
        # with the way out (issue 39).
        bin_dir = self.path("bin")
        os.makedirs(bin_dir)
        real = shutil.which("gcc")
        self.write("bin/gcc", f'#!/bin/sh\nexec {real} -B{bin_dir}/ "$@"\n')
        self.write("bin/cc", f'#!/bin/sh\nexport CPATH=/opt/inc\nexec {real} "$@"\n')
        for name in ("gcc", "cc"):
            os.chmod(self.path("bin", name), 0o755)
        rows, out = self.doctor(env={"PATH": bin_dir + ":" + os.environ["PATH"]})
        self.assertEqual(rows["toolchain.wrapper:gcc"]["status"], "ok", rows["toolchain.wrapper:gcc"])
        self.assertIn(f"-B {bin_dir}/", rows["toolchain.wrapper:gcc"]["value"])
        self.assertIn("not replayed on a hit", rows["toolchain.wrapper:gcc"]["value"])
        cc = rows["toolchain.wrapper:cc"]
        self.assertEqual(cc["status"], "warn", cc)
        self.assertIn("wrapper-environment", cc["message"])
        self.assertIn("set it in the build's environment", cc["fix"])
        self.assertEqual(out["fails"], 0)

    def test_rocm_rows_this_machine(self):
        if HIPCC is None:
            self.skipTest("hipcc is not on PATH")
        rows, out = self.doctor(["--hipcc", HIPCC])
        self.assertEqual(out["fails"], 0, json.dumps(out, indent=1))
        # hipcc's own answers: its version, and the clang its clang line names.
        version = re.search(r"HIP version: (\d+\.\d+\.\d+)",
                            subprocess.run([HIPCC, "--version"], capture_output=True, text=True).stdout).group(1)
        hipcc = rows["rocm.hipcc"]
        self.assertEqual(hipcc["status"], "ok", hipcc)
        self.assertRegex(hipcc["value"], rf"^HIP {re.escape(version)} at {re.escape(HIPCC)} \(ROCm root /\S*\)$")
        verbose = subprocess.run([HIPCC, "--version"], capture_output=True, text=True,
                                 env=dict(os.environ, HIPCC_VERBOSE="1")).stdout
        clang_path = re.search(r"^hipcc-cmd: (\S+)", verbose, re.M).group(1)
        clang_version = subprocess.run([clang_path, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        self.assertEqual(rows["rocm.clang"], {"section": "rocm", "name": "clang", "status": "ok",
                                              "value": f"{clang_version} at {clang_path}", "message": "", "fix": ""})
        libs = rows["rocm.device-libs"]
        self.assertEqual(libs["status"], "ok", libs)
        bitcode_dir = libs["value"].split(" (")[0]
        for lib in ("ocml.bc", "ockl.bc", "oclc_isa_version_90a.bc"):
            self.assertTrue(os.path.exists(os.path.join(bitcode_dir, lib)), libs)
        rocm = re.search(r"ROCm root (\S+)\)", hipcc["value"]).group(1)
        layout = rows["rocm.cmake-hip-lang"]
        expected = os.path.join(rocm, "lib", "cmake", "hip-lang", "hip-lang-config.cmake")
        if os.path.exists(expected):
            self.assertEqual(layout["status"], "ok", layout)
        else:  # Debian: under the multiarch library directory
            self.assertEqual(layout["status"], "warn", layout)
            self.assertIn("CMake's HIP language (enable_language(HIP)) will not configure", layout["message"])
            self.assertIn(expected, layout["message"])
            self.assertIn("AMD's layout", layout["fix"])
        r = self.kache(["doctor"])
        self.assertRegex(r.stdout, rf"ok\s+rocm\.hipcc\s+HIP {re.escape(version)} at ")

    def test_hipcc_not_asked_about_gives_no_warning(self):
        # Issue 42: a ROCm found on PATH of a machine whose builds are CUDA only is no warning; its rows
        # keep their facts, and --hipcc (above) gives back the warnings a HIP build needs.
        if HIPCC is None:
            self.skipTest("hipcc is not on PATH")
        asked, _ = self.doctor(["--hipcc", HIPCC])
        rows, _ = self.doctor()
        rocm = {name: row for name, row in rows.items() if name.startswith("rocm.")}
        self.assertEqual(set(rocm), {name for name in asked if name.startswith("rocm.")})
        for name, row in rocm.items():
            self.assertEqual(row["status"], "ok", row)
            if asked[name]["status"] == "warn":
                self.assertEqual((row["value"], row["fix"]), (asked[name]["value"], ""))
                self.assertIn("kache doctor --hipcc hipcc", row["message"])

    def test_cuda_only_machine_with_a_shared_remote_warns_of_nothing(self):
        # Issue 42: no hipcc, a file:// share, a redis on this machine: every row is quiet. The driver
        # rows say what this machine's GPU driver is and stay out of it (a CI runner may have an old one).
        bin_dir = self.path("bin")
        os.makedirs(bin_dir)
        for tool in ("gcc", "g++", "cc", "c++"):
            os.symlink(shutil.which(tool), os.path.join(bin_dir, tool))
        share = self.path("share")
        os.makedirs(share)
        os.makedirs(self.cache)
        path = os.pathsep.join([os.path.dirname(kachetest.NVCC), bin_dir])
        remotes = [f"file://{share}"]
        import servers
        if not servers.missing("redis-server"):
            redis = servers.Redis()
            self.addCleanup(redis.stop)
            remotes.append(redis.url)
        for url in remotes:
            rows, out = self.doctor(env={"PATH": path, "KACHE_REMOTE_STORAGE": url})
            loud = {name: row for name, row in rows.items() if row["status"] != "ok" and row["section"] != "driver"}
            self.assertEqual(loud, {}, url)
            self.assertEqual(rows["rocm.hipcc"]["value"], "not found")
            self.assertEqual(rows["remote.signing"]["status"], "ok")

    def test_unsigned_remote_in_clear_over_the_network_warns(self):
        # The one unsigned remote worth a warning: entries crossing the network in clear (http://, redis://
        # to another host). 192.0.2.1 is TEST-NET-1: never reachable, so the probe fails fast.
        rows, _ = self.doctor(env={"KACHE_REMOTE_STORAGE": "http://192.0.2.1:1/cache https://192.0.2.1:1/c"},
                              code=1)
        self.assertEqual(rows["remote.signing"]["status"], "warn")
        self.assertIn("http://192.0.2.1:1/cache", rows["remote.signing"]["message"])
        self.assertNotIn("https://", rows["remote.signing"]["message"])

    def test_s3_through_a_plain_http_endpoint_warns(self):
        # SigV4 signs the requests, not the answers: an http:// endpoint on another host is traffic in clear.
        env = {"KACHE_REMOTE_STORAGE": "s3://bkt|endpoint=http://192.0.2.7:9000",
               "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "us-east-1"}
        r = self.kache(["doctor", "--json"], env=env, check=False)
        rows = {f'{row["section"]}.{row["name"]}': row for row in json.loads(r.stdout)["rows"]}
        self.assertEqual(rows["remote.signing"]["status"], "warn", rows["remote.signing"])
        self.assertIn("192.0.2.7", rows["remote.signing"]["message"])

    def test_without_hipcc_one_ok_row(self):
        bin_dir = self.path("bin")
        os.makedirs(bin_dir)
        os.symlink(shutil.which("gcc"), os.path.join(bin_dir, "gcc"))
        for args, env in (([], {"PATH": bin_dir}), (["--hipcc", self.path("no-such-hipcc")], None)):
            rows, out = self.doctor(args, env=env)
            rocm = {name: row for name, row in rows.items() if name.startswith("rocm.")}
            self.assertEqual(list(rocm), ["rocm.hipcc"], rocm)
            self.assertEqual((rocm["rocm.hipcc"]["status"], rocm["rocm.hipcc"]["value"]), ("ok", "not found"))
            self.assertIn("kache hipcc does not apply", rocm["rocm.hipcc"]["message"])
            self.assertEqual(out["fails"], 0)

    def fake_hipcc(self, name, body):
        p = self.path(name)
        with open(p, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(p, 0o755)
        return p

    def test_rocm_probe_is_bounded(self):
        # A hipcc that never answers, and one that leaves a child holding its output: each probe ends at
        # --probe-timeout with a warn row (without the bound doctor would wait for ever).
        # And one that closes its output, then hangs: the bound holds past the end of its output.
        for body in ("exec sleep 600\n", "sleep 600 &\nexit 0\n", "exec >/dev/null 2>&1\nexec sleep 600\n"):
            hipcc = self.fake_hipcc("hanging-hipcc", body)
            rows, out = self.doctor(["--hipcc", hipcc, "--probe-timeout", "0.5"])
            row = rows["rocm.hipcc"]
            self.assertEqual((row["status"], row["value"]), ("warn", hipcc), row)
            self.assertIn("did not answer within 0.5 s", row["message"])
            self.assertIn("HIPCC_VERBOSE=1", row["fix"])
            self.assertEqual(out["fails"], 0)
        r = self.kache(["doctor", "--probe-timeout", "never"], check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--probe-timeout takes seconds", r.stderr)

    def test_cmake_hip_lang_layouts(self):
        # A hipcc whose clang line names a ROCm root laid out as AMD installs it, then as Debian does.
        root = self.path("rocm")
        hipcc = self.fake_hipcc("hipcc", f"""echo 'hipcc-cmd: /opt/x/clang++ --hip-version=9.9.1 --rocm-path={root} --offload-arch=gfx90a --hip-device-lib-path="{root}/bc" -x hip'
echo 'Fake clang version 99.0.0' >&2
echo ' "/opt/x/clang" "-cc1" "-mlink-builtin-bitcode" "{root}/bc/ocml.bc" "-mlink-builtin-bitcode" "{root}/bc/ockl.bc"' >&2
""")
        upstream = os.path.join(root, "lib", "cmake", "hip-lang")
        os.makedirs(upstream)
        open(os.path.join(upstream, "hip-lang-config.cmake"), "w").close()
        rows, _ = self.doctor(["--hipcc", hipcc])
        self.assertEqual(rows["rocm.hipcc"]["value"], f"HIP 9.9.1 at {hipcc} (ROCm root {root})")
        self.assertEqual(rows["rocm.clang"]["value"], "Fake clang version 99.0.0 at /opt/x/clang++")
        self.assertEqual(rows["rocm.device-libs"]["value"],
                         f"{root}/bc (a gfx90a compile links 2 bitcode libraries from it)")
        self.assertEqual(rows["rocm.cmake-hip-lang"]["status"], "ok")
        self.assertIn(upstream, rows["rocm.cmake-hip-lang"]["value"])
        multiarch = os.path.join(root, "lib", "x86_64-linux-gnu", "cmake", "hip-lang")
        os.makedirs(os.path.dirname(multiarch))
        os.rename(upstream, multiarch)
        rows, out = self.doctor(["--hipcc", hipcc])
        layout = rows["rocm.cmake-hip-lang"]
        self.assertEqual(layout["status"], "warn", layout)
        self.assertEqual(layout["value"], f"no {upstream} (this ROCm has {multiarch})")
        self.assertIn("will not configure", layout["message"])
        self.assertEqual(out["fails"], 0)

    def test_cache_dir_and_remote_rows(self):
        import servers
        os.makedirs(self.cache)
        os.chmod(self.cache, 0o777)
        port = servers.free_port()  # nothing listens: the remote is dead
        rows, _ = self.doctor(env={"KACHE_REMOTE_STORAGE": f"redis://:pw@127.0.0.1:{port}", "KACHE_DIRECT_MODE": "0"},
                              code=1)
        self.assertEqual(rows["cache.world-writable"]["status"], "fail")
        self.assertEqual(rows["config.direct-mode"]["status"], "warn")
        self.assertEqual(rows["remote.reachable"]["status"], "fail")
        self.assertIn("***", rows["remote.reachable"]["value"])
        self.assertEqual(rows["remote.signing"]["status"], "ok", "a redis on this machine: no one else's traffic")
        if servers.missing("redis-server"):
            return
        os.chmod(self.cache, 0o755)
        with servers.Redis(password="right") as redis:
            rows, _ = self.doctor(env={"KACHE_REMOTE_STORAGE": redis.url})
            self.assertEqual(rows["remote.reachable"]["status"], "ok")
            self.assertEqual(rows["remote.writable"]["status"], "ok")
            self.assertEqual(redis.keys(), [], "the probe value is removed")
            rows, _ = self.doctor(env={"KACHE_REMOTE_STORAGE": redis.url.replace(":right@", ":wrong@")}, code=1)
            self.assertEqual(rows["remote.authenticated"]["status"], "fail")


if __name__ == "__main__":
    kachetest.main()
