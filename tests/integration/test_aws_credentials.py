"""S3 credentials as the AWS SDKs find them (issue 42): web identity (STS AssumeRoleWithWebIdentity), a
profile's web_identity_token_file, credential_process, SSO, ECS container credentials and EC2 instance
metadata (IMDSv2), each from a loopback stand-in for its service written here, each handing out the keys
the real S3 server (Swift's s3api, which verifies SigV4: tests/integration/servers.py) accepts; a real
compile through kache then stores in and hits from the bucket. The stand-ins count their calls: a second
process reuses the credentials kept in the private per-user directory, and credentials two minutes from
expiry are fetched anew. No secret reaches kache's stderr, log, events, stats or doctor output.
"""
import http.server
import json
import os
import sys
import threading
import time
import urllib.parse

import kachetest
from test_s3 import S3Case

SESSION_TOKEN = "stand-in-session-token-5d1f0c"
WEB_IDENTITY_TOKEN = "eyJ-stand-in-web-identity-jwt-77ab3"
SSO_ACCESS_TOKEN = "stand-in-sso-access-token-9c2e"
ECS_AUTH_TOKEN = "stand-in-ecs-authorization-4b8a"
IMDS_TOKEN = "stand-in-imds-session-token-e31f"
ROLE_ARN = "arn:aws:iam::111122223333:role/kache-ci"


def iso(seconds_from_now):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


class StandIn:
    """One loopback HTTP server standing in for STS, the SSO portal, ECS and IMDSv2 at once: each path
    answers as its service does, with the keys given, and every request is recorded."""

    def __init__(self, access_key, secret_key):
        self.access_key, self.secret_key = access_key, secret_key
        self.lifetime_s = 3600
        self.requests = []
        stand_in = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, body, kind="application/json"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self):
                stand_in.requests.append(("PUT", self.path, dict(self.headers)))
                if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self.answer(200, IMDS_TOKEN, "text/plain")
                self.answer(400, "")

            def do_POST(self):
                # STS as the SDKs call it: a form in the body, never the token in the URL.
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length).decode()
                stand_in.requests.append(("POST", self.path, dict(self.headers), body))
                form = dict(urllib.parse.parse_qsl(body))
                if (self.path != "/" or self.headers.get("Content-Type") != "application/x-www-form-urlencoded"
                        or form.get("Action") != "AssumeRoleWithWebIdentity"):
                    return self.answer(400, "")
                if form.get("WebIdentityToken") != WEB_IDENTITY_TOKEN or form.get("RoleArn") != ROLE_ARN:
                    return self.answer(403, "<ErrorResponse><Error><Code>AccessDenied</Code></Error>"
                                            "</ErrorResponse>", "text/xml")
                return self.answer(200, stand_in.sts_xml(), "text/xml")

            def do_GET(self):
                stand_in.requests.append(("GET", self.path, dict(self.headers)))
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/federation/credentials":
                    if self.headers.get("x-amz-sso_bearer_token") != SSO_ACCESS_TOKEN:
                        return self.answer(401, "{}")
                    return self.answer(200, json.dumps({"roleCredentials": {
                        "accessKeyId": stand_in.access_key, "secretAccessKey": stand_in.secret_key,
                        "sessionToken": SESSION_TOKEN,
                        "expiration": int((time.time() + stand_in.lifetime_s) * 1000)}}))
                if url.path == "/ecs/credentials":
                    if self.headers.get("Authorization") != ECS_AUTH_TOKEN:
                        return self.answer(401, "{}")
                    return self.answer(200, stand_in.document())
                if url.path.startswith("/latest/meta-data/iam/security-credentials/"):
                    if self.headers.get("X-aws-ec2-metadata-token") != IMDS_TOKEN:
                        return self.answer(401, "")
                    role = url.path.rsplit("/", 1)[1]
                    if role == "":
                        return self.answer(200, "kache-instance-role", "text/plain")
                    return self.answer(200, stand_in.document()) if role == "kache-instance-role" else \
                        self.answer(404, "")
                self.answer(404, "")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def sts_xml(self):
        return ("<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
                f"<AccessKeyId>{self.access_key}</AccessKeyId><SecretAccessKey>{self.secret_key}</SecretAccessKey>"
                f"<SessionToken>{SESSION_TOKEN}</SessionToken><Expiration>{iso(self.lifetime_s)}</Expiration>"
                "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>")

    def document(self):
        return json.dumps({"Code": "Success", "AccessKeyId": self.access_key, "SecretAccessKey": self.secret_key,
                           "Token": SESSION_TOKEN, "Expiration": iso(self.lifetime_s)})

    def calls(self, path_start):
        return [r for r in self.requests if r[1].startswith(path_start)]

    def sts_calls(self):
        return [r for r in self.requests if r[0] == "POST" and r[1] == "/"]


class CredentialChain(S3Case):
    def setUp(self):
        super().setUp()
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                     "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                     "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
            self.env.pop(name, None)
        runtime = self.path("runtime")
        os.makedirs(runtime, mode=0o700)
        self.env.update({"XDG_RUNTIME_DIR": runtime, "AWS_CONFIG_FILE": self.path("no-config-file"),
                         "AWS_EC2_METADATA_DISABLED": "true"})
        self.stand_in = StandIn(self.swift.access_key, self.swift.secret_key)
        self.addCleanup(self.stand_in.stop)

    def assert_stored_in_the_bucket(self, env, unit="a"):
        before = len(self.swift.keys(self.bucket))
        r = self.compile("one", unit, env)
        self.assertEqual(r.stderr, "")
        s = self.stats_of(env)
        self.assertEqual(s["remote_errors"], 0, s)
        self.assertGreater(len(self.swift.keys(self.bucket)), before, "nothing was stored in the bucket")
        return r

    def assert_shared_to_a_second_cache(self, env):
        """Another cache dir with the same credentials hits what the first stored."""
        self.build("one", env)
        two = dict(env, KACHE_DIR=self.path("cache-two"), KACHE_PATHS_BASE_DIRS=self.path("two"))
        self.build("two", two)
        s = self.stats_of(two)
        self.assertEqual((s["hits"], s["misses"], s["remote_errors"]), (3, 0, 0), s)

    def assert_no_secret_shown(self, env, outputs=()):
        secrets = [SESSION_TOKEN, WEB_IDENTITY_TOKEN, SSO_ACCESS_TOKEN,
                   ECS_AUTH_TOKEN, IMDS_TOKEN, self.swift.secret_key, self.swift.access_key]
        texts = list(outputs)
        for args in (["doctor"], ["doctor", "--json"], ["-s"], ["--show-stats", "--json"], ["--show-config"]):
            r = self.kache(args, env=env, check=False)
            texts += [r.stdout, r.stderr]
        for root, _, files in os.walk(env["KACHE_DIR"]):
            for name in files:
                with open(os.path.join(root, name), "rb") as f:
                    texts.append(f.read().decode("latin-1"))
        for secret in secrets:
            for text in texts:
                self.assertNotIn(secret, text)
        self.assert_credential_dir_private(env)

    def assert_credential_dir_private(self, env):
        """The kept credentials: a 0700 directory of the user's, 0600 files, outside the cache dir."""
        runtime = env.get("XDG_RUNTIME_DIR") or self.env["XDG_RUNTIME_DIR"]
        directory = os.path.join(runtime, "kache-aws")
        if not os.path.isdir(directory):
            return  # static keys: nothing kept
        st = os.lstat(directory)
        self.assertEqual(st.st_uid, os.geteuid())
        self.assertEqual(st.st_mode & 0o777, 0o700, oct(st.st_mode))
        for name in os.listdir(directory):
            st = os.lstat(os.path.join(directory, name))
            self.assertEqual(st.st_mode & 0o777, 0o600, (name, oct(st.st_mode)))
        self.assertFalse(os.path.realpath(directory).startswith(os.path.realpath(env["KACHE_DIR"]) + os.sep))

    def web_identity_env(self, **extra):
        token = self.write("token.jwt", WEB_IDENTITY_TOKEN + "\n")
        settings = dict(AWS_WEB_IDENTITY_TOKEN_FILE=token, AWS_ROLE_ARN=ROLE_ARN,
                        AWS_ENDPOINT_URL_STS=self.stand_in.url)
        settings.update(extra)
        return self.env_for("one", self.url(), **settings)

    def test_web_identity_through_sts(self):
        env = self.web_identity_env()
        r = self.assert_stored_in_the_bucket(env)
        self.assertEqual(len(self.stand_in.sts_calls()), 1)
        self.assert_shared_to_a_second_cache(env)
        self.assertEqual(len(self.stand_in.sts_calls()), 1, "each process asked STS again")
        rows = self.doctor_rows(env)
        self.assertIn("web identity token of role " + ROLE_ARN, rows["authenticated"]["value"])
        self.assert_no_secret_shown(env, [r.stdout, r.stderr])

    def test_another_web_identity_token_is_not_given_the_kept_credentials(self):
        env = self.web_identity_env()
        self.assert_stored_in_the_bucket(env)
        self.assertEqual(len(self.stand_in.sts_calls()), 1)
        # Job B: same role, same token path, another (here invalid) token: STS is asked and refuses.
        self.write("token.jwt", "eyJ-another-jobs-token\n")
        other = dict(env, KACHE_DIR=self.path("cache-b"))
        self.assert_warned_once_and_compiled([self.compile("one", u, other).stderr for u in ("a", "b")])
        later = self.stand_in.sts_calls()[1:]
        self.assertGreaterEqual(len(later), 1, "job B was given job A's kept credentials")
        for call in later:
            self.assertEqual(dict(urllib.parse.parse_qsl(call[3]))["WebIdentityToken"], "eyJ-another-jobs-token")
        self.assertIn("STS refused the web identity token of role " + ROLE_ARN,
                      open(os.path.join(other["KACHE_DIR"], "kache.log")).read())

    def test_parallel_compiles_ask_sts_once(self):
        import concurrent.futures
        from test_remote import KERNEL
        env = self.web_identity_env()
        units = [f"p{i}" for i in range(8)]
        for i, u in enumerate(units):
            self.write(f"one/src/{u}.cu", KERNEL % (10 + i, i, 10 + i, i))
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda u: self.compile("one", u, env), units))
        for r in results:
            self.assertEqual(r.stderr, "")
        self.assertEqual(len(self.stand_in.sts_calls()), 1, "parallel compiles each asked STS")

    def test_credentials_two_minutes_from_expiry_are_fetched_anew(self):
        self.stand_in.lifetime_s = 120
        env = self.web_identity_env()
        self.assert_stored_in_the_bucket(env, "a")
        self.assert_stored_in_the_bucket(env, "b")
        self.assertEqual(len(self.stand_in.sts_calls()), 2)
        self.stand_in.lifetime_s = 3600
        self.assert_stored_in_the_bucket(env, "c")
        self.compile("one", "a", dict(env, KACHE_DIR=self.path("cache-fresh")))
        self.assertEqual(len(self.stand_in.sts_calls()), 3)

    def test_credentials_expiring_within_a_minute_are_renewed_within_one_compile(self):
        # The miss's lookup and its store are separate requests: each gets credentials good for it.
        self.stand_in.lifetime_s = 30
        env = self.web_identity_env()
        self.assert_stored_in_the_bucket(env)
        self.assertGreater(len(self.stand_in.sts_calls()), 1)

    def test_web_identity_of_a_profile(self):
        token = self.write("token.jwt", WEB_IDENTITY_TOKEN)
        config = self.write("aws-config", f"[profile ci]\nrole_arn = {ROLE_ARN}\nweb_identity_token_file = {token}\n")
        env = self.env_for("one", self.url(), AWS_PROFILE="ci", AWS_CONFIG_FILE=config,
                           AWS_ENDPOINT_URL=self.stand_in.url)
        self.assert_stored_in_the_bucket(env)
        self.assertEqual(len(self.stand_in.sts_calls()), 1)

    def test_refused_web_identity_builds_locally_with_a_reason(self):
        env = self.web_identity_env(AWS_ROLE_ARN="arn:aws:iam::111122223333:role/other")
        s = self.assert_build_unharmed(env)
        self.assertGreater(s["remote_errors"] + s["remote_skipped"], 0, s)
        self.assertIn("STS refused the web identity token of role arn:aws:iam::111122223333:role/other",
                      self.cache_log("one"))
        self.assertEqual(self.swift.keys(self.bucket), [])

    def credential_process(self, expires_in=None):
        calls = self.path("process-calls")
        document = {"Version": 1, "AccessKeyId": self.swift.access_key, "SecretAccessKey": self.swift.secret_key}
        if expires_in is not None:
            document.update(SessionToken=SESSION_TOKEN, Expiration=iso(expires_in))
        script = self.write("helper dir/credentials.py",
                            "import sys\n"
                            f"open({calls!r}, 'a').write('called\\n')\n"
                            f"print({json.dumps(document)!r})\n")
        config = self.write("aws-config", f"[profile helper]\ncredential_process = {sys.executable} "
                                          f"'{script}' --profile helper\n")
        return self.env_for("one", self.url(), AWS_PROFILE="helper", AWS_CONFIG_FILE=config), calls

    def test_credential_process(self):
        env, calls = self.credential_process(expires_in=3600)
        r = self.assert_stored_in_the_bucket(env)
        self.assert_shared_to_a_second_cache(env)
        with open(calls) as f:
            self.assertEqual(f.read().count("called"), 1, "each process ran the credential_process again")
        self.assert_no_secret_shown(env, [r.stdout, r.stderr])

    def test_sso_profile(self):
        home = self.path("home")
        config = self.write("aws-config", "[profile dev]\nsso_session = corp\nsso_account_id = 111122223333\n"
                                          "sso_role_name = Developer\nregion = us-east-1\n"
                                          "[sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\n"
                                          "sso_region = eu-west-1\n")
        import hashlib
        cache_file = os.path.join(home, ".aws", "sso", "cache", hashlib.sha1(b"corp").hexdigest() + ".json")
        os.makedirs(os.path.dirname(cache_file))
        with open(cache_file, "w") as f:
            json.dump({"accessToken": SSO_ACCESS_TOKEN, "expiresAt": iso(3600)}, f)
        env = self.env_for("one", self.url(), AWS_PROFILE="dev", AWS_CONFIG_FILE=config, HOME=home,
                           AWS_ENDPOINT_URL_SSO=self.stand_in.url)
        r = self.assert_stored_in_the_bucket(env)
        calls = self.stand_in.calls("/federation/credentials")
        self.assertEqual(len(calls), 1)
        self.assertIn("role_name=Developer", calls[0][1])
        self.assertIn("account_id=111122223333", calls[0][1])
        self.assert_no_secret_shown(env, [r.stdout, r.stderr])
        with open(cache_file, "w") as f:
            json.dump({"accessToken": SSO_ACCESS_TOKEN, "expiresAt": iso(-60)}, f)
        os.makedirs(self.path("runtime-2"), mode=0o700)
        expired = dict(env, XDG_RUNTIME_DIR=self.path("runtime-2"), KACHE_DIR=self.path("cache-expired"))
        self.compile("one", "b", expired)
        with open(os.path.join(expired["KACHE_DIR"], "kache.log")) as f:
            self.assertIn("run `aws sso login --profile dev`", f.read())

    def test_ecs_container_credentials(self):
        token_file = self.write("ecs-token", ECS_AUTH_TOKEN)
        env = self.env_for("one", self.url(), AWS_CONTAINER_CREDENTIALS_FULL_URI=self.stand_in.url + "/ecs/credentials",
                           AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=token_file)
        r = self.assert_stored_in_the_bucket(env)
        self.assert_shared_to_a_second_cache(env)
        self.assertEqual(len(self.stand_in.calls("/ecs/")), 1)
        self.assert_no_secret_shown(env, [r.stdout, r.stderr])

    def test_instance_metadata_v2(self):
        env = self.env_for("one", self.url(), AWS_EC2_METADATA_DISABLED=None,
                           AWS_EC2_METADATA_SERVICE_ENDPOINT=self.stand_in.url)
        r = self.assert_stored_in_the_bucket(env)
        reads = [c for c in self.stand_in.requests if c[0] == "GET"]
        self.assertEqual([c[1] for c in reads], ["/latest/meta-data/iam/security-credentials/",
                                                 "/latest/meta-data/iam/security-credentials/kache-instance-role"])
        self.assertEqual(self.stand_in.requests[0][:2], ("PUT", "/latest/api/token"))
        self.assert_shared_to_a_second_cache(env)
        self.assertEqual(len(self.stand_in.calls("/latest/api/token")), 1)
        self.assertIn("instance profile role kache-instance-role", self.doctor_rows(env)["authenticated"]["value"])
        self.assert_no_secret_shown(env, [r.stdout, r.stderr])

    def test_instance_metadata_is_not_asked_when_disabled(self):
        env = self.env_for("one", self.url(), AWS_EC2_METADATA_SERVICE_ENDPOINT=self.stand_in.url)
        self.assert_build_unharmed(env)
        self.assertEqual(self.stand_in.requests, [])

    def test_region_from_the_environment_unless_the_url_names_one(self):
        # Swift signs for us-east-1 only: another region in the signature is refused.
        env = self.env_for("one", self.url(), AWS_ACCESS_KEY_ID=self.swift.access_key,
                           AWS_SECRET_ACCESS_KEY=self.swift.secret_key, AWS_REGION="eu-west-1")
        rows = self.doctor_rows(env)
        self.assertEqual(rows["authenticated"]["status"], "fail", rows)
        self.assertIn("AuthorizationHeaderMalformed", rows["authenticated"]["message"])
        config = self.write("aws-config", "[default]\nregion = eu-west-1\n")
        env = dict(env, AWS_REGION=None, AWS_CONFIG_FILE=config)
        self.assertEqual(self.doctor_rows(env)["authenticated"]["status"], "fail")
        env = self.env_for("one", self.url("|region=us-east-1"), **{k: v for k, v in env.items() if k.startswith("AWS")})
        self.assertEqual(self.doctor_rows(env)["authenticated"]["status"], "ok")

    def assert_warned_once_and_compiled(self, stderrs):
        # The compiler's stderr untouched; kache's warning on the first compile of this build (the test's
        # process group) only, as a person running the build sees it.
        for text in stderrs:
            self.assertEqual(kachetest.compiler_stderr(text), "", text)
        self.assertEqual([len(kachetest.kache_warnings(t)) for t in stderrs], [1] + [0] * (len(stderrs) - 1), stderrs)

    def assert_build_unharmed(self, env):
        self.assert_warned_once_and_compiled([self.compile("one", u, env).stderr for u in ("a", "b", "c")])
        s = self.stats_of(env)
        self.assertEqual((s["misses"], s["remote_writes"]), (3, 0), s)
        return s


class InstanceMetadataStandIn(kachetest.KacheTestCase):
    """The IMDS stand-in is IMDSv2 only: a GET without the session token is refused (so kache's success
    above proves it asked for one)."""

    def test_a_read_without_the_token_is_refused(self):
        import urllib.request
        import urllib.error
        stand_in = StandIn("k", "s")
        self.addCleanup(stand_in.stop)
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(stand_in.url + "/latest/meta-data/iam/security-credentials/", timeout=10)
        self.assertEqual(refused.exception.code, 401)


if __name__ == "__main__":
    kachetest.main()
