"""S3 remote storage (issue 31) against a real S3 server that checks SigV4 signatures: OpenStack Swift with
its s3api middleware and tempauth, all in one on loopback (tests/integration/servers.py: Swift), started
once for this file. Two checkouts with their own cache dirs share entries through a bucket; a second
cache dir gets all hits and writes nothing back; a wrong secret, a dead endpoint and a skewed clock never
fail a build and each shows as its own doctor row; a read-only URL writes nothing.
"""
import datetime
import json
import os

import kachetest
import servers
from test_remote import UNITS, RemoteCase



class S3Case(RemoteCase):
    swift = None
    buckets = 0

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        why = servers.swift_missing()
        if why:
            raise kachetest.unittest.SkipTest(f"no S3 server: {why}")
        cls.swift = servers.Swift()

    @classmethod
    def tearDownClass(cls):
        if cls.swift:
            cls.swift.stop()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        S3Case.buckets += 1
        self.bucket = f"kache-test-{S3Case.buckets}"
        self.swift.create_bucket(self.bucket)
        self.env["AWS_ACCESS_KEY_ID"] = self.swift.access_key
        self.env["AWS_SECRET_ACCESS_KEY"] = self.swift.secret_key
        self.env.pop("AWS_SESSION_TOKEN", None)
        self.env["AWS_SHARED_CREDENTIALS_FILE"] = self.path("no-credentials-file")

    def url(self, extra=""):
        return f"s3://{self.bucket}/team|endpoint={self.swift.endpoint}{extra}"

    def doctor_rows(self, env):
        r = self.kache(["doctor", "--json"], env=env, check=False)
        out = json.loads(r.stdout)
        return {row["name"]: row for row in out["rows"] if row["section"] == "remote"}


class SharedThroughS3(S3Case):
    def test_miss_then_hit_across_two_cache_dirs(self):
        self.share_through(self.url())
        keys = self.swift.keys(self.bucket)
        self.assertTrue(keys and all(k.startswith("team/") for k in keys), keys)

    def test_a_second_cache_dir_gets_all_hits_and_writes_nothing_back(self):
        self.build("one", self.env_for("one", self.url()))
        stored = {k: self.swift.get(self.bucket, k) for k in self.swift.keys(self.bucket)}
        two = self.env_for("two", self.url())
        self.build("two", two)
        s = self.stats_of(two)
        self.assertEqual((s["hits"], s["misses"], s["remote_writes"], s["remote_errors"]), (3, 0, 0, 0), s)
        self.assertEqual({k: self.swift.get(self.bucket, k) for k in self.swift.keys(self.bucket)}, stored)
        self.assert_plain_equivalent("two")

    def test_credentials_from_a_profile_of_the_shared_file(self):
        creds = self.write("aws-credentials", f"[default]\naws_access_key_id = wrong\naws_secret_access_key = x\n"
                                              f"[team]\naws_access_key_id = {self.swift.access_key}\n"
                                              f"aws_secret_access_key = {self.swift.secret_key}\n")
        env = self.env_for("one", self.url(), AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
                           AWS_SHARED_CREDENTIALS_FILE=creds, AWS_PROFILE="team")
        self.compile("one", "a", env)
        s = self.stats_of(env)
        self.assertEqual((s["misses"], s["remote_errors"], s["remote_writes"] > 0), (1, 0, True), s)
        rows = self.doctor_rows(env)
        self.assertIn("profile team of " + creds, rows["authenticated"]["value"])

    def test_doctor_rows_of_a_working_bucket(self):
        rows = self.doctor_rows(self.env_for("one", self.url()))
        for name in ("reachable", "clock-skew", "authenticated", "writable"):
            self.assertEqual(rows[name]["status"], "ok", rows)
        self.assertEqual(self.swift.keys(self.bucket), [], "the doctor's probe left an object behind")

    def test_read_only_writes_nothing(self):
        env = self.env_for("one", self.url("|read-only"))
        self.build("one", env)
        self.assertEqual(self.swift.keys(self.bucket), [])
        self.assertIn("read-only", self.doctor_rows(env)["writable"]["value"])


class S3Failures(S3Case):
    def assert_build_unharmed(self, env):
        for i, u in enumerate(UNITS):
            r = self.compile("one", u, env)
            # The build's first compile carries kache's one warning line (issue 42); the rest are silent.
            self.assertEqual(kachetest.compiler_stderr(r.stderr), "", "a compile's stderr is the compiler's")
            self.assertEqual(len(kachetest.kache_warnings(r.stderr)), 1 if i == 0 else 0, r.stderr)
        s = self.stats_of(env)
        self.assertEqual((s["misses"], s["remote_writes"]), (3, 0), s)
        self.assert_plain_equivalent("one")
        return s

    def test_wrong_secret_is_refused_with_a_clear_doctor_row(self):
        env = self.env_for("one", self.url(), AWS_SECRET_ACCESS_KEY="not-the-secret")
        s = self.assert_build_unharmed(env)
        self.assertGreater(s["remote_errors"] + s["remote_skipped"], 0, s)
        self.assertIn("refused the credentials", self.cache_log("one"))
        self.assertNotIn("not-the-secret", self.cache_log("one"))
        self.assertEqual(self.swift.keys(self.bucket), [])
        rows = self.doctor_rows(dict(env, KACHE_DIR=self.path("doctor-cache")))
        self.assertEqual(rows["reachable"]["status"], "ok", rows)
        self.assertEqual(rows["authenticated"]["status"], "fail", rows)
        self.assertIn("SignatureDoesNotMatch", rows["authenticated"]["message"])
        self.assertNotIn("writable", rows)

    def test_dead_endpoint(self):
        dead = f"s3://{self.bucket}|endpoint=http://127.0.0.1:{servers.free_port()}"
        env = self.env_for("one", dead)
        s = self.assert_build_unharmed(env)
        self.assertGreater(s["remote_errors"], 0, s)
        rows = self.doctor_rows(env)
        self.assertEqual(rows["reachable"]["status"], "fail", rows)
        self.assertNotIn("authenticated", rows)

    def test_skewed_clock(self):
        if not os.path.exists(servers.LIBFAKETIME):
            self.skipTest(f"{servers.LIBFAKETIME} is missing (scripts/setup-tests.sh installs faketime)")
        # The server's clock an hour ahead of this machine's (its proxy runs with libfaketime: nvcc hangs
        # under libfaketime here, so the client's clock cannot be the skewed one). SigV4 refuses every
        # request kache signs.
        ahead = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        with servers.Swift(proxy_clock="+1h") as skewed:
            status, body = servers.s3_request(skewed.endpoint, skewed.access_key, skewed.secret_key, "PUT",
                                              "/skewed", when=ahead)
            self.assertEqual(status, 200, body)
            env = self.env_for("one", f"s3://skewed|endpoint={skewed.endpoint}")
            s = self.assert_build_unharmed(env)
            self.assertGreater(s["remote_errors"] + s["remote_skipped"], 0, s)
            self.assertIn("RequestTimeTooSkewed", self.cache_log("one"))
            rows = self.doctor_rows(dict(env, KACHE_DIR=self.path("doctor-cache")))
            self.assertEqual(rows["reachable"]["status"], "ok", rows)
            self.assertEqual(rows["clock-skew"]["status"], "fail", rows)
            self.assertIn("behind the server's", rows["clock-skew"]["value"])
            self.assertIn("15 minutes", rows["clock-skew"]["message"])
            self.assertEqual(rows["authenticated"]["status"], "fail", rows)
            self.assertIn("RequestTimeTooSkewed", rows["authenticated"]["message"])
            status, body = servers.s3_request(skewed.endpoint, skewed.access_key, skewed.secret_key, "GET",
                                              "/skewed", when=ahead)
            self.assertEqual((status, b"<Key>" in body), (200, False), body)


if __name__ == "__main__":
    kachetest.main()
