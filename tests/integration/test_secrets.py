"""A remote password is never printed: every URL form (good ones pointing at a server that refuses, and
malformed ones that do not parse), set in the environment or in the config file, through every output
kache has: a compile's stdout and stderr, the cache dir's log, KACHE_LOG=kache=trace to a log file,
--show-config, -s (text and JSON), --print-stats, and doctor (text and JSON)."""
import os

import servers
from kachetest import KERNEL, KacheTestCase, main

SECRET = "s3cr3tPWq"


def url_forms(port):
    """Each URL carries SECRET where a password (or a mistyped secret attribute) goes."""
    return [
        f"redis://:{SECRET}@127.0.0.1:{port}",
        f"redis://user:{SECRET}@127.0.0.1:{port}",
        f"http://user:{SECRET}@127.0.0.1:{port}/cache",
        f"https://user:{SECRET}@127.0.0.1:{port}/cache",
        f"redis+unix://:{SECRET}@/nonexistent/redis.sock",
        # Malformed: each is a config warning that quotes the value.
        f"redis://:{SECRET}@",
        f"redis:/:{SECRET}@127.0.0.1",
        f"http://:{SECRET}@127.0.0.1:{port}",
        f"redis://:{SECRET}@127.0.0.1:notaport",
        f"redis://127.0.0.1:{port}|password={SECRET}",
        f"https://user:{SECRET}@[::1",
        f"redis://:{SECRET}@127.0.0.1:{port}/db",
        f"ftp://user:{SECRET}@127.0.0.1/x",
    ]


class NoSecretPrinted(KacheTestCase):
    def outputs(self, env):
        """Every text kache prints or logs with this environment, as (what, text) pairs."""
        out = []
        trace_log = self.path("trace.log")
        src = self.write("k.cu", KERNEL, mtime_ns=0)
        for n in range(2):  # a miss, then a lookup again
            r = self.kache(["nvcc", "-c", src, "-o", self.path("k.o")], env=env, check=False)
            out.append((f"compile {n} stdout/stderr", r.stdout + r.stderr))
        r = self.kache(["nvcc", "-c", src, "-o", self.path("k.o")],
                       env=dict(env, KACHE_LOG="kache=trace", KACHE_LOG_FILE=trace_log), check=False)
        out.append(("traced compile stdout/stderr", r.stdout + r.stderr))
        r = self.kache(["nvcc", "-c", src, "-o", self.path("k.o")], env=dict(env, KACHE_LOG="kache=trace"),
                       check=False)
        out.append(("trace on stderr", r.stdout + r.stderr))
        for args in (["--show-config"], ["-p"], ["-s"], ["-s", "--json"], ["-s", "-vv"], ["--print-stats"],
                     ["-k", "remote.storage"], ["doctor"], ["doctor", "--json"]):
            r = self.kache(args, env=env, check=False)
            out.append((" ".join(args), r.stdout + r.stderr))
        for log in (trace_log, os.path.join(self.cache, "kache.log")):
            if os.path.exists(log):
                with open(log) as f:
                    out.append((log, f.read()))
        return out

    def assert_no_secret(self, env, what):
        for name, text in self.outputs(env):
            self.assertNotIn(SECRET, text, f"{what}: {name} printed the password:\n{text}")

    def test_environment(self):
        port = servers.free_port()  # nothing listens there: every remote refuses
        for url in url_forms(port):
            with self.subTest(url=url):
                self.assert_no_secret({"KACHE_REMOTE_STORAGE": url}, f"KACHE_REMOTE_STORAGE={url}")

    def test_aws_credentials(self):
        # S3 keys from the environment or a profile of the shared credentials file: a dead endpoint, and
        # a bucket on AWS's own host name (unresolvable here or refused: either way a failure to report).
        creds = self.write("aws-credentials", f"[ci]\naws_access_key_id = AKID\naws_secret_access_key = {SECRET}\n"
                                              f"aws_session_token = {SECRET}tok\n")
        port = servers.free_port()
        for url in (f"s3://kache-bucket/p|endpoint=http://127.0.0.1:{port}", "s3://kache-bucket|connect-timeout=50"):
            for env in ({"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": SECRET},
                        {"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_PROFILE": "ci"}):
                with self.subTest(url=url, env=sorted(env)):
                    self.assert_no_secret(dict(env, KACHE_REMOTE_STORAGE=url), f"{url} with {sorted(env)}")

    def test_config_file(self):
        port = servers.free_port()
        for url in url_forms(port):
            with self.subTest(url=url):
                with open(self.env["KACHE_CONFIG"], "w") as f:
                    f.write(f'[remote]\nstorage = "{url}"\n')
                self.assert_no_secret({}, f"remote.storage = {url} in the config file")

    def test_the_test_sees_a_printed_value(self):
        # The check reaches the outputs: a value kache does print (a mistyped cache.compression_level)
        # is found by the same search.
        with open(self.env["KACHE_CONFIG"], "w") as f:
            f.write(f'[cache]\ncompression_level = "{SECRET}"\n')
        found = [name for name, text in self.outputs({}) if SECRET in text]
        self.assertIn("--show-config", found)
        self.assertIn("doctor --json", found)
        self.assertIn(os.path.join(self.cache, "kache.log"), found)


if __name__ == "__main__":
    main()
