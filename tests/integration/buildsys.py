"""Helpers for the build-system integration tests (CMake, Make, Meson, the device axis, the GPU run).

The launcher under test is KACHE_UNDER_TEST when set, else kachetest's KACHE (KACHE_BIN). Pointing
KACHE_UNDER_TEST at tests/integration/stale_wrapper.py (a cache that serves the first object it stored
for an output path) must make test_meson_adr1320 and test_device_axis fail: that is how they show
they can fail.
"""
import json
import os
import shlex
import shutil
import struct
import subprocess

import elfsections
import kachetest

LAUNCHER = os.path.abspath(os.environ["KACHE_UNDER_TEST"]) if os.environ.get("KACHE_UNDER_TEST") else kachetest.KACHE
kachetest.KACHE = LAUNCHER  # KacheTestCase.kache() and .stats() then talk to the launcher under test
NVCC = kachetest.NVCC
EXAMPLES = os.path.join(kachetest.SOURCE_DIR, "examples")
JOBS = os.environ.get("KACHE_TEST_JOBS", "2")

class AllAllocated:
    """Every allocated section of an object or a program (elfsections.allocated_sections: code, data,
    the string sections .rodata.str1.*, .nv_fatbin, __nv_relfatbin, __nv_module_id, ...), but those
    named in `but`."""

    def __init__(self, but=()):
        # A program's build id hashes the whole file, the symbol table included, where nvcc names its
        # tmpxft_<pid> temporary: two plain builds of one program differ there and nowhere else.
        self.but = tuple(but) + (".note.gnu.build-id",)


# What decides what an object or a program does: everything a linker or a loader reads.
SECTIONS = AllAllocated()
# __nv_module_id is the name nvcc derives from the source's absolute path for -rdc objects (so it
# differs between two checkouts even for plain nvcc): compared only where the source path is the same.
PATH_FREE_SECTIONS = AllAllocated(but=("__nv_module_id",))


def clean_env(cache, home):
    """The caller's environment without any KACHE_* setting or nvcc driver flags, with a private
    cache and config."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("KACHE_") and k not in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH",
                                                       "CUDACXX", "CUDAARCHS", "CUDAFLAGS", "NVCC", "MAKEFLAGS")}
    env["KACHE_DIR"] = cache
    env["KACHE_CONFIG"] = os.path.join(home, ".kache.toml")
    env["XDG_CONFIG_HOME"] = os.path.join(home, ".config")
    return env


def run(cmd, cwd, env, check=True):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"command failed ({r.returncode}) in {cwd}:\n{shlex.join(cmd)}\n"
                             f"--- stdout\n{r.stdout[-6000:]}\n--- stderr\n{r.stderr[-6000:]}")
    return r


def stats(env):
    return json.loads(run([LAUNCHER, "--show-stats", "--json"], cwd="/", env=env).stdout)


def zero_stats(env):
    run([LAUNCHER, "--zero-stats"], cwd="/", env=env)


def copy_example(name, dst):
    """Copies examples/NAME to dst without build outputs a developer may have left there."""
    shutil.copytree(os.path.join(EXAMPLES, name), dst,
                    ignore=shutil.ignore_patterns("build*", "__pycache__", "*.o", "*.d", "*.a"))
    return dst


def sections(path, names=SECTIONS):
    """{name: bytes} of the sections `names` (a tuple of names, absent ones as b"", or AllAllocated)."""
    present = elfsections.allocated_sections(path)
    if isinstance(names, AllAllocated):
        return {name: data for name, data in present.items() if name.split("#")[0] not in names.but}
    return {name: present.get(name, b"") for name in names}


def section_diff(a, b, names=SECTIONS):
    """The names of the sections that differ between two objects or programs (one present in only one
    of them counts as differing)."""
    sa, sb = sections(a, names), sections(b, names)
    return sorted(s for s in set(sa) | set(sb) if sa.get(s) != sb.get(s))


def module_id(path):
    return sections(path, ("__nv_module_id",))["__nv_module_id"]


def device_code(path):
    """The device code entries of an object or program: a sorted list of ("elf" | "ptx", "sm_XX"), read
    from the fatbinary headers in .nv_fatbin and __nv_relfatbin (no cuobjdump needed)."""
    entries = []
    for data in sections(path, (".nv_fatbin", "__nv_relfatbin")).values():
        pos = 0
        while pos + 16 <= len(data):
            magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
            if magic != 0xBA55ED50:
                break
            entry, end = pos + header_size, pos + header_size + fat_size
            while entry + 32 <= end:
                kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
                sm = struct.unpack_from("<I", data, entry + 28)[0]
                entries.append(({1: "ptx", 2: "elf"}.get(kind, f"kind{kind}"), f"sm_{sm}"))
                entry += entry_header + payload
            pos = end
    return sorted(entries)


def elf_archs(path):
    """The sm_XX of every device ELF (cubin) in an object."""
    return {sm for kind, sm in device_code(path) if kind == "elf"}


def ninja_log_entries(build_dir):
    """The (output, command hash) lines of .ninja_log, in order."""
    p = os.path.join(build_dir, ".ninja_log")
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]


def ninja_rebuilt(build_dir, env, extra=()):
    """Runs ninja and returns (set of outputs it ran a command for, explain text)."""
    before = len(ninja_log_entries(build_dir))
    r = run(["ninja", "-C", build_dir, "-j", JOBS, "-d", "explain"] + list(extra), cwd=build_dir, env=env)
    after = ninja_log_entries(build_dir)
    return {fields[3] for fields in after[before:]}, r.stdout + r.stderr


def ninja_dry_run_is_empty(build_dir, env):
    r = run(["ninja", "-C", build_dir, "-n"], cwd=build_dir, env=env)
    return "no work to do" in r.stdout, r.stdout


def ninja_command(build_dir, target, env):
    """The command ninja runs for target, split."""
    lines = run(["ninja", "-C", build_dir, "-t", "commands", target], cwd=build_dir, env=env).stdout.splitlines()
    return shlex.split(lines[-1])


def plain_nvcc_command(cmd, out, depfile=None):
    """Turns a build's `LAUNCHER nvcc ARGS` (or `nvcc ARGS`) compile command into plain nvcc's, writing
    the object to out (and the -MF file to depfile)."""
    args = list(cmd)
    if os.path.basename(args[0]) != "nvcc":
        args = args[1:]  # the launcher
    assert os.path.basename(args[0]) == "nvcc", cmd
    args[0] = NVCC
    for i, a in enumerate(args):
        if a == "-o":
            args[i + 1] = out
        elif a == "-MF":
            args[i + 1] = depfile or out + ".d"
    return args


def compile_outputs(build):
    """The object of every CUDA compile step in build's compile_commands.json (paths below build)."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    outs = []
    for e in entries:
        out = e.get("output")
        if out is None:
            args = e["command"].split()
            out = args[args.index("-o") + 1]
        outs.append(os.path.relpath(os.path.join(e["directory"], out), build))
    return sorted(outs)
