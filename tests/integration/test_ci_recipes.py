"""docs/ci.md's recipes, run here (issue 42): the shell of each GitHub Actions `run:` step and of each
GitLab CI `script:` line, taken from the page's fenced YAML, runs with bash in a small CMake project (C
and C++) as the CI would run it: GitHub's steps one by one (`bash -eo pipefail`, `if: always()` after a
failure), GitLab's lines in one shell that stops at the first failure, with the variables each CI sets
(GITHUB_STEP_SUMMARY, RUNNER_TEMP, CI_PROJECT_DIR, ...) and its cache (actions/cache's key and
restore-keys, GitLab's cache key and fallback keys) kept between two runs at the same workspace path, as
a runner's is. The second run hits, its report and summary say so, and --fail-under holds it to the
recipe's bar; a run whose sources all changed fails the gate. The S3 variant runs against a real S3
server (OpenStack Swift, tests/integration/servers.py) with fresh cache dirs, so its hits come from the
bucket. Only the step named "Install kache" is skipped: the kache under test is on PATH instead.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import kachetest
import servers

try:
    import yaml
except ImportError:  # python3-yaml: scripts/setup-tests.sh installs it for /usr/bin/python3
    yaml = None

SYSTEM_PYTHON = "/usr/bin/python3"

DOC = os.path.join(kachetest.SOURCE_DIR, "docs", "ci.md")
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def recipes():
    """The fenced YAML blocks of docs/ci.md, parsed: the two GitHub workflows, then GitLab's jobs. Parsed
    here with PyYAML, else by the system's Python 3 (where python3-yaml is installed) when the test's own
    interpreter lacks it; never skipped: without a YAML parser the test fails and says so."""
    with open(DOC) as f:
        blocks = re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
    if yaml is not None:
        return [yaml.safe_load(block) for block in blocks]
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and os.access(SYSTEM_PYTHON, os.X_OK):
        r = subprocess.run([SYSTEM_PYTHON, "-c", "import json, sys, yaml; "
                            "print(json.dumps([yaml.safe_load(b) for b in json.load(sys.stdin)]))"],
                           input=json.dumps(blocks), capture_output=True, text=True)
        if r.returncode == 0:
            return json.loads(r.stdout)
    raise AssertionError(f"no YAML parser to read docs/ci.md's recipes: neither {sys.executable} nor {SYSTEM_PYTHON} "
                         "imports yaml (apt-get install python3-yaml; scripts/setup-tests.sh installs it)")


def tools_missing():
    for tool in ("cmake", "ninja", "gcc", "g++"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    return None


def write_project(root, variant=""):
    """A small CMake project: two C sources, two C++ sources, one program."""
    sources = {
        "src/checksum.c": "int checksum(const char* s) { int h = 7; while (*s) h = h * 31 + *s++; return h; }\n",
        "src/scale.c": "double scale(double x) { return x * 2.5; }\n",
        "src/table.cpp": "#include <vector>\nint table_size() { return static_cast<int>(std::vector<int>(4).size()); }\n",
        "src/main.cpp": 'extern "C" int checksum(const char*);\nextern "C" double scale(double);\n'
                        "int table_size();\nint main() { return checksum(\"k\") + table_size() + (int)scale(1) > 0 ? 0 : 1; }\n",
    }
    os.makedirs(os.path.join(root, "src"), exist_ok=True)
    for rel, text in sources.items():
        with open(os.path.join(root, rel), "w") as f:
            f.write(text.replace("return", f"return {len(variant)} +", 1) if variant and rel.endswith(".c") else
                    text + (f"// {variant}\n" if variant else ""))
        os.utime(os.path.join(root, rel), (1_700_000_000, 1_700_000_000))  # older than any compile's clock tick
    with open(os.path.join(root, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.16)\nproject(ci_demo C CXX)\n"
                "add_executable(demo src/checksum.c src/scale.c src/table.cpp src/main.cpp)\n")
    return 4


class Runner:
    """One CI machine: a workspace at a fixed path, the kache under test on PATH, a fresh HOME."""

    def __init__(self, case, name):
        self.case = case
        self.root = case.ws
        self.workspace = os.path.join(self.root, name)
        self.project = os.path.join(self.root, "project")
        self.bin = os.path.join(self.root, "bin")
        os.makedirs(self.bin, exist_ok=True)
        if not os.path.exists(os.path.join(self.bin, "kache")):
            os.symlink(kachetest.KACHE, os.path.join(self.bin, "kache"))
        self.saved = {}  # CI cache key -> a copy of the cached paths, oldest first

    def base_env(self, run):
        home = os.path.join(self.root, f"home-{run}")
        temp = os.path.join(self.root, f"temp-{run}")
        os.makedirs(home, exist_ok=True)
        os.makedirs(temp, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("KACHE_", "AWS_", "GITHUB_", "CI_", "RUNNER_")) and k != "CPATH"}
        env.update(HOME=home, PATH=self.bin + os.pathsep + env.get("PATH", ""), TMPDIR=temp, CI="true")
        env.pop("XDG_CACHE_HOME", None)
        env["XDG_CONFIG_HOME"] = os.path.join(home, ".config")
        return env

    def fresh_workspace(self):
        shutil.rmtree(self.workspace, ignore_errors=True)
        shutil.copytree(self.project, self.workspace, symlinks=True)

    def save_cache(self, key, paths):
        copy = tempfile.mkdtemp(prefix="ci-cache-", dir=self.root)
        for rel in paths:
            src = os.path.join(self.workspace, rel.rstrip("/"))
            if os.path.exists(src):
                shutil.copytree(src, os.path.join(copy, rel.rstrip("/")), symlinks=True)
        self.saved.pop(key, None)
        self.saved[key] = copy

    def restore_cache(self, key, prefixes, paths):
        """actions/cache: the key itself, else the newest cache whose key starts with a restore key."""
        found = self.saved.get(key)
        for prefix in prefixes:
            if found:
                break
            matches = [k for k in self.saved if k.startswith(prefix)]
            found = self.saved[matches[-1]] if matches else None
        if found:
            for rel in paths:
                if os.path.exists(os.path.join(found, rel.rstrip("/"))):
                    shutil.copytree(os.path.join(found, rel.rstrip("/")), os.path.join(self.workspace, rel.rstrip("/")),
                                    symlinks=True)
        return found is not None


def evaluate(text, context):
    """A workflow's ${{ ... }} expressions: context names only, every one known to the test."""
    def value(match):
        name = match.group(1)
        if name not in context:
            raise AssertionError(f"docs/ci.md uses ${{{{ {name} }}}}, which the test does not provide")
        return context[name]
    return EXPRESSION.sub(value, str(text))


class CiRecipes(kachetest.KacheTestCase):
    def setUp(self):
        why = tools_missing()
        if why:
            self.skipTest(why)
        self.private_workspace("kache-ci-")
        self.compiles = write_project(os.path.join(self.ws, "project"))
        self.github, self.github_s3, self.gitlab = recipes()

    # --- GitHub Actions ----------------------------------------------------------------------------
    def run_github(self, workflow, runner, run, context):
        """Runs the workflow's job once; returns (whether it succeeded, the steps' results by name, env)."""
        job = workflow["jobs"]["build"]
        runner.fresh_workspace()
        context = dict(context, **{"github.workspace": runner.workspace, "github.run_id": str(run),
                                   "github.run_attempt": "1", "runner.os": "Linux", "github.ref_name": "main",
                                   "github.sha": f"{run:040x}"})
        env = runner.base_env(run)
        env.update({k: evaluate(v, context) for k, v in job.get("env", {}).items()})
        summary = os.path.join(env["TMPDIR"], "step_summary.md")
        open(summary, "w").close()
        env.update(GITHUB_STEP_SUMMARY=summary, RUNNER_TEMP=env["TMPDIR"], GITHUB_WORKSPACE=runner.workspace)
        ok, results, caches = True, {}, []
        for step in job["steps"]:
            condition = step.get("if")
            self.assertIn(condition, (None, "always()"), step)
            if not ok and condition != "always()":
                continue
            uses = step.get("uses", "")
            if uses.startswith("actions/checkout@"):
                continue  # fresh_workspace above
            if uses.startswith("actions/cache@"):
                with_ = step["with"]
                key = evaluate(with_["key"], context)
                prefixes = [evaluate(p, context) for p in with_.get("restore-keys", "").split("\n") if p.strip()]
                paths = [with_["path"]]
                runner.restore_cache(key, prefixes, paths)
                caches.append((key, paths))
                continue
            if uses.startswith("actions/upload-artifact@"):
                results["artifact"] = os.path.exists(os.path.join(runner.workspace, step["with"]["path"]))
                continue
            self.assertFalse(uses, f"a step the test cannot run: {step}")
            if step.get("name") == "Install kache":
                continue
            self.assertNotRegex(step["run"], EXPRESSION, "an expression in a run: block is spliced into the shell")
            r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                               cwd=runner.workspace, env=env, capture_output=True, text=True, timeout=600)
            results[step.get("name", step["run"].split()[0])] = r
            ok = ok and r.returncode == 0
        if ok:  # actions/cache saves in its post step, after a successful job
            for key, paths in caches:
                runner.save_cache(key, paths)
        with open(summary) as f:
            results["summary"] = f.read()
        return ok, results, env

    def report_json(self, env, cwd):
        r = subprocess.run(["kache", "report", "--json"], cwd=cwd, env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_github_actions_with_actions_cache(self):
        runner = Runner(self, "work")
        ok, steps, env = self.run_github(self.github, runner, 1, {})
        self.assertTrue(ok, {k: (v.stdout, v.stderr) for k, v in steps.items() if hasattr(v, "stderr")})
        self.assertTrue(steps["artifact"], "kache-report.html is written")
        cold = self.report_json(env, runner.workspace)
        self.assertEqual((cold["compiles"], cold["misses"], cold["hits"]), (self.compiles, self.compiles, 0))
        self.assertIn("## kache report: build gha-1-1 (this job's KACHE_BUILD_ID)", steps["summary"])

        ok, steps, env = self.run_github(self.github, runner, 2, {})
        self.assertTrue(ok, steps["kache report"].stderr)
        self.assertTrue(os.path.exists(os.path.join(env["RUNNER_TEMP"], "kache-restored")), "the cache was restored")
        warm = self.report_json(env, runner.workspace)
        self.assertEqual((warm["selection"]["build"], warm["compiles"], warm["hits"], warm["misses"]),
                         ("gha-2-1", self.compiles, self.compiles, 0))
        summary = steps["summary"]
        self.assertIn("## kache report: build gha-2-1 (this job's KACHE_BUILD_ID)", summary)
        row = next(line for line in summary.splitlines() if re.match(r"\| \d", line))
        self.assertTrue(row.startswith(f"| {self.compiles} | {self.compiles} | 0 |"), row)
        self.assertIn(f"kache {warm['version']}", summary)
        self.assertIn(env["KACHE_DIR"], summary)

        # A job that records no compile (here a project with nothing to compile; in life a launcher dropped
        # or a build dead first) restores run 2's cache, events/ included: the gate judges this job's own
        # build (KACHE_BUILD_ID), not run 2's, all hits, and fails it.
        with open(os.path.join(runner.project, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.16)\nproject(ci_demo NONE)\n")
        ok, steps, env = self.run_github(self.github, runner, 4, {})
        self.assertFalse(ok)
        gate = steps["kache report"]
        self.assertEqual(gate.returncode, 1, gate.stdout + gate.stderr)
        self.assertIn("no compile of build gha-4-1 was recorded", gate.stderr)
        self.assertIn("No compile of build gha-4-1 was recorded.", steps["summary"])

        # Every source changed: the restored cache holds nothing this run can hit, and the gate fails it.
        write_project(runner.project, variant="changed")
        ok, steps, env = self.run_github(self.github, runner, 3, {})
        self.assertFalse(ok)
        gate = steps["kache report"]
        self.assertEqual(gate.returncode, 1)
        self.assertIn("below --fail-under 80", gate.stderr)
        self.assertIn("artifact", steps, "the report is uploaded all the same (if: always())")

    def test_github_actions_with_an_s3_bucket(self):
        why = servers.swift_missing()
        if why:
            self.skipTest(f"no S3 server: {why}")
        swift = servers.Swift()
        self.addCleanup(swift.stop)
        swift.create_bucket("ci-cache")
        context = {"vars.KACHE_REMOTE_STORAGE": f"s3://ci-cache/kache|endpoint={swift.endpoint}",
                   "secrets.KACHE_AWS_ACCESS_KEY_ID": swift.access_key,
                   "secrets.KACHE_AWS_SECRET_ACCESS_KEY": swift.secret_key,
                   "vars.KACHE_FAIL_UNDER": ""}
        runner = Runner(self, "work")
        ok, steps, env = self.run_github(self.github_s3, runner, 1, context)
        self.assertTrue(ok, steps["kache report"].stderr if "kache report" in steps else steps)
        self.assertTrue(swift.keys("ci-cache"), "the first job filled the bucket")
        ok, steps, env = self.run_github(self.github_s3, runner, 2, dict(context, **{"vars.KACHE_FAIL_UNDER": "80"}))
        self.assertTrue(ok, steps["kache report"].stderr)
        warm = self.report_json(env, runner.workspace)
        self.assertEqual((warm["hits"], warm["misses"], warm["errors"]), (self.compiles, 0, 0))
        self.assertEqual(warm["counts"].get("remote_hits"), self.compiles, "a fresh machine: every hit is the bucket's")
        self.assertIn("## kache report: build gha-2-1 (this job's KACHE_BUILD_ID)", steps["summary"])

    # --- GitLab CI ---------------------------------------------------------------------------------
    def run_gitlab(self, runner, pipeline):
        job = self.gitlab["build"]
        runner.fresh_workspace()
        env = runner.base_env(pipeline)
        env.update(CI_PROJECT_DIR=runner.workspace, CI_PIPELINE_ID=str(pipeline), CI_JOB_ID=str(100 + pipeline),
                   CI_COMMIT_REF_SLUG="main", CI_DEFAULT_BRANCH="main", BUILD_IMAGE="kache-ci")
        for name, value in job["variables"].items():
            env[name] = re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), str(value))
        expand = lambda text: re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), text)  # noqa: E731
        cache = job["cache"]
        key = expand(cache["key"])
        runner.restore_cache(key, [expand(k) for k in cache.get("fallback_keys", [])], cache["paths"])
        script = "set -eo pipefail\n" + "\n".join(job["script"]) + "\n"
        r = subprocess.run(["bash", "--noprofile", "--norc", "-c", script], cwd=runner.workspace, env=env,
                           capture_output=True, text=True, timeout=600)
        if r.returncode == 0 or cache.get("when") == "always":
            runner.save_cache(key, cache["paths"])
        artifacts = [os.path.exists(os.path.join(runner.workspace, p)) for p in job["artifacts"]["paths"]]
        return r, env, artifacts

    def test_gitlab_ci_with_its_cache(self):
        runner = Runner(self, "builds")
        r, env, artifacts = self.run_gitlab(runner, 1)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"{self.compiles} compiles: 0 hits, {self.compiles} misses", r.stdout)
        r, env, artifacts = self.run_gitlab(runner, 2)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(os.path.exists(os.path.join(runner.workspace, "kache-restored")), "the cache was restored")
        self.assertTrue(all(artifacts), "kache-report.html is written")
        self.assertIn("kache report: build gitlab-2-102 (this job's KACHE_BUILD_ID)", r.stdout)
        self.assertIn(f"{self.compiles} compiles: {self.compiles} hits, 0 misses", r.stdout)
        self.assertIn(env["KACHE_DIR"], r.stdout)
        write_project(runner.project, variant="changed")
        r, env, artifacts = self.run_gitlab(runner, 3)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("below --fail-under 80", r.stderr)


if __name__ == "__main__":
    kachetest.main()
