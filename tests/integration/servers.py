"""Real servers for remote-storage integration tests (the Python twin of tests/unit/servers.*).

Each runs on a free loopback port in its own temporary directory and is stopped by stop() (or by
leaving its `with` block): Debian's redis-server, nginx with WebDAV (optional basic auth, bearer token,
TLS with a CA made here with the openssl CLI) and a black-hole listener for timeouts.

    with servers.Redis(password="pw") as r:   # r.port, r.url ("redis://:pw@127.0.0.1:PORT"), r.get(key)
    with servers.Nginx(tls=True) as n:       # n.url, n.data_dir, n.ca_cert
    with servers.BlackHole(full_backlog=True) as b:   # b.url("redis") -> "redis://127.0.0.1:PORT"
    with servers.Swift() as s:   # an S3 server: s.endpoint, s.access_key, s.secret_key, s.create_bucket(b)

missing(name) says why a test must skip: the binary is not installed (scripts/setup-tests.sh installs them);
swift_missing() likewise for OpenStack Swift.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SEARCH_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin"


def find(name):
    return shutil.which(name, path=SEARCH_PATH)


def missing(name):
    """A skip reason when the server binary `name` is not installed, else None."""
    return None if find(name) else f"{name} is not installed (scripts/setup-tests.sh)"


def free_port():
    """A port that was free on 127.0.0.1 a moment ago (bound to port 0, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port, what):
    # Servers start in well under a second; 20 s covers a loaded machine (not a timed assertion).
    for _ in range(2000):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"{what} on port {port} did not come up")


def _wait_for_pid_file(pid_file, what):
    # A daemonized server listens a moment before it writes its pid file (redis: the port answered first
    # in 9 of 30 starts measured); until the file holds a whole line, stop() could not stop the server.
    for _ in range(2000):
        try:
            with open(pid_file) as f:
                if f.read().endswith("\n"):
                    return
        except OSError:
            pass
        time.sleep(0.01)
    raise RuntimeError(f"{what} wrote no pid file {pid_file}")


def _stop_pid_file(pid_file):
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(1000):
            os.kill(pid, 0)
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class _Server:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Redis(_Server):
    """redis-server on a free port, daemonized, no persistence. users: {name: password} (ACL users with
    every key and command); unix_socket=True also listens on self.socket."""

    def __init__(self, password=None, users=None, unix_socket=False, port=None):
        self.dir = tempfile.mkdtemp(prefix="kache-redis-")  # short: unix socket paths max 107 bytes
        self.port = port or free_port()  # port: a restart where a stopped server listened
        self.password = password
        self.socket = os.path.join(self.dir, "redis.sock") if unix_socket else None
        argv = [find("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "yes", "--pidfile", os.path.join(self.dir, "redis.pid"),
                "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")]
        if self.socket:
            argv += ["--unixsocket", self.socket, "--unixsocketperm", "700"]
        if password:
            argv += ["--requirepass", password]
        for name, pw in (users or {}).items():
            argv += ["--user", name, "on", ">" + pw, "~*", "&*", "+@all"]
        subprocess.run(argv, check=True, capture_output=True)
        _wait_for_port(self.port, "redis-server")
        _wait_for_pid_file(os.path.join(self.dir, "redis.pid"), "redis-server")

    @property
    def url(self):
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}"

    def command(self, *args):
        """One command over RESP; returns bytes, None (nil), an int, or raises on an error reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            f = s.makefile("rwb")
            cmds = ([("AUTH", self.password)] if self.password else []) + [args]
            for cmd in cmds:
                parts = [a if isinstance(a, bytes) else str(a).encode() for a in cmd]
                f.write(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
            f.flush()
            reply = None
            for _ in cmds:
                reply = _read_reply(f)
            return reply

    def get(self, key):
        return self.command("GET", key)

    def keys(self, pattern="*"):
        return sorted(k.decode() for k in self.command("KEYS", pattern))

    def stop(self):
        _stop_pid_file(os.path.join(self.dir, "redis.pid"))
        shutil.rmtree(self.dir, ignore_errors=True)


def _read_reply(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        return [_read_reply(f) for _ in range(int(rest))]
    raise RuntimeError(f"unexpected RESP line {line!r}")


def make_ca(dir):
    """A CA and a server certificate for 127.0.0.1 and localhost: (ca_cert, server_cert, server_key)."""
    ca_key, ca_cert = os.path.join(dir, "ca.key"), os.path.join(dir, "ca.crt")
    key, csr, cert, ext = (os.path.join(dir, n) for n in ("server.key", "server.csr", "server.crt", "server.ext"))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", *ec, "-keyout", ca_key, "-out", ca_cert, "-days", "2", "-subj", "/CN=kache test CA")
    run("req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
        "-days", "2", "-extfile", ext)
    return ca_cert, cert, key


class Nginx(_Server):
    """nginx serving a WebDAV share (PUT, DELETE, create_full_put_path) from self.data_dir.
    basic_auth=(user, password): an htpasswd made with `openssl passwd -apr1`; bearer_token: requests
    must carry "Authorization: Bearer TOKEN"; tls=True: https with a CA made here (self.ca_cert)."""

    def __init__(self, basic_auth=None, bearer_token=None, tls=False):
        self.dir = tempfile.mkdtemp(prefix="kache-nginx-")
        self.data_dir = os.path.join(self.dir, "data")
        os.makedirs(self.data_dir)
        tmp = os.path.join(self.dir, "tmp")
        os.makedirs(tmp)
        self.port = free_port()
        self.tls = tls
        self.ca_cert = None
        location = ["dav_methods PUT DELETE;", "create_full_put_path on;", "dav_access user:rw group:rw all:r;"]
        if basic_auth:
            user, password = basic_auth
            digest = subprocess.run(["openssl", "passwd", "-apr1", password], check=True, capture_output=True,
                                    text=True).stdout.strip()
            htpasswd = os.path.join(self.dir, "htpasswd")
            with open(htpasswd, "w") as f:
                f.write(f"{user}:{digest}\n")
            location += ['auth_basic "kache";', f"auth_basic_user_file {htpasswd};"]
        if bearer_token:
            location.append(f'if ($http_authorization != "Bearer {bearer_token}") {{ return 401; }}')
        listen = [f"listen 127.0.0.1:{self.port}{' ssl' if tls else ''};"]
        if tls:
            self.ca_cert, cert, key = make_ca(self.dir)
            listen += [f"ssl_certificate {cert};", f"ssl_certificate_key {key};"]
        conf = "\n".join([
            "user root;" if os.geteuid() == 0 else "",  # the WebDAV root belongs to us
            "worker_processes 1;", "daemon on;", f"pid {self.dir}/nginx.pid;", f"error_log {self.dir}/error.log;",
            "events { worker_connections 64; }",
            "http {", "access_log off;", "client_max_body_size 0;",
            *(f"{k}_temp_path {tmp}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")),
            "server {", *listen, f"root {self.data_dir};", "location / {", *location, "}", "}", "}", ""])
        conf_path = os.path.join(self.dir, "nginx.conf")
        with open(conf_path, "w") as f:
            f.write(conf)
        subprocess.run([find("nginx"), "-p", self.dir, "-c", conf_path, "-e", os.path.join(self.dir, "error.log")],
                       check=True, capture_output=True)
        _wait_for_port(self.port, "nginx")
        _wait_for_pid_file(os.path.join(self.dir, "nginx.pid"), "nginx")

    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def stored_files(self):
        """Paths (relative to the share) of every value stored on the server."""
        out = []
        for root, _, files in os.walk(self.data_dir):
            out += [os.path.relpath(os.path.join(root, f), self.data_dir) for f in files]
        return sorted(out)

    def stop(self):
        _stop_pid_file(os.path.join(self.dir, "nginx.pid"))
        shutil.rmtree(self.dir, ignore_errors=True)


class BlackHole(_Server):
    """A loopback listener that never accepts: connections complete in the kernel but nothing ever
    answers (an operation timeout). full_backlog=True fills the accept queue first, so a new connect's
    SYN is dropped and the connect itself times out."""

    def __init__(self, full_backlog=False, host="127.0.0.1", port=0):
        # host="::1": an IPv6 hole; port: one that another server listens on at another address.
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.socket(family)
        self.listener.bind((host, port))
        self.listener.listen(0 if full_backlog else 64)
        self.port = self.listener.getsockname()[1]
        self.fillers = []
        if full_backlog:
            for _ in range(2):
                s = socket.socket(family)
                s.setblocking(False)
                s.connect_ex((host, self.port))
                self.fillers.append(s)
            time.sleep(0.05)  # let the handshakes settle

    def url(self, scheme):
        return f"{scheme}://127.0.0.1:{self.port}"

    def stop(self):
        for s in self.fillers:
            s.close()
        self.listener.close()


# Debian's interpreter: Swift's modules are installed for it alone (the python3 first on PATH may be another).
DEBIAN_PYTHON = "/usr/bin/python3"
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
SWIFT_SERVERS = ("swift-account-server", "swift-container-server", "swift-object-server", "swift-proxy-server")


def swift_missing():
    """Why an all-in-one Swift cannot start here, else None."""
    for name in SWIFT_SERVERS:
        if not os.path.exists("/usr/bin/" + name):
            return f"/usr/bin/{name} is not installed (scripts/setup-tests.sh installs Debian's swift packages)"
    if not os.path.exists("/etc/swift/swift.conf"):
        return "/etc/swift/swift.conf is missing (the swift package installs it; Swift reads it from that path only)"
    probe = subprocess.run([DEBIAN_PYTHON, "-c", "import swift.common.middleware.s3api"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"{DEBIAN_PYTHON} cannot import Swift's s3api middleware: {probe.stderr.strip()[-200:]}"
    return None


_RINGS = """
import sys
from swift.common.ring import RingBuilder
swift_dir = sys.argv[1]
for name, port in zip(("account", "container", "object"), sys.argv[2:]):
    builder = RingBuilder(6, 1, 1)
    builder.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1", "port": int(port), "device": "d1",
                     "weight": 1.0})
    builder.rebalance()
    builder.get_ring().save(f"{swift_dir}/{name}.ring.gz")
"""

_PROXY_CONF = """
[pipeline:main]
pipeline = catch_errors gatekeeper proxy-logging cache listing_formats s3api tempauth copy proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:copy]
use = egg:swift#copy
[filter:cache]
use = egg:swift#memcache
# No memcached: a port nothing listens on, refused at once (a memcached left from another run would keep
# stale account data and break bucket creation on this fresh storage).
memcache_servers = 127.0.0.1:{memcache_port}
[filter:s3api]
use = egg:swift#s3api
location = us-east-1
[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = {secret} .admin
"""


class Swift(_Server):
    """OpenStack Swift all in one on loopback: a proxy with the s3api middleware (an S3 server that
    verifies SigV4 signatures) and tempauth, and account, container and object servers on one device that
    is a plain directory. Credentials: access key "test:tester", secret self.secret_key. Each server is one
    process (workers = 0), stopped by pid."""

    def __init__(self, proxy_clock=None):
        # proxy_clock: a faketime offset ("+1h") for the proxy, which checks each request's time against
        # its clock and sends it as Date: a server whose clock is skewed against this machine's.
        why = swift_missing()
        if why:
            raise RuntimeError(why)
        self.dir = tempfile.mkdtemp(prefix="kache-swift-")
        self.access_key, self.secret_key = "test:tester", "testing"
        ports = {name: free_port() for name in ("account", "container", "object", "proxy")}
        self.port = ports["proxy"]
        devices = os.path.join(self.dir, "dev")
        os.makedirs(os.path.join(devices, "d1"))
        subprocess.run([DEBIAN_PYTHON, "-c", _RINGS, self.dir, str(ports["account"]), str(ports["container"]),
                        str(ports["object"])], check=True, capture_output=True)
        user = pwd_name()
        self.procs = []
        try:
            for name in ("account", "container", "object", "proxy"):
                common = (f"[DEFAULT]\nbind_ip = 127.0.0.1\nbind_port = {ports[name]}\nswift_dir = {self.dir}\n"
                          f"devices = {devices}\nmount_check = false\nworkers = 0\nuser = {user}\n"
                          f"log_name = {name}\n")
                body = (_PROXY_CONF.format(memcache_port=free_port(), secret=self.secret_key) if name == "proxy" else
                        f"[pipeline:main]\npipeline = {name}-server\n[app:{name}-server]\nuse = egg:swift#{name}\n")
                conf = os.path.join(self.dir, f"{name}-server.conf")
                with open(conf, "w") as f:
                    f.write(common + body)
                log = open(os.path.join(self.dir, f"{name}.log"), "w")
                env = dict(os.environ)
                if proxy_clock and name == "proxy":
                    # libfaketime preloaded into the server itself (not the faketime program, whose child
                    # the server would be: Swift calls setsid(), and stop() could not reach it).
                    env.update(LD_PRELOAD=LIBFAKETIME, FAKETIME=proxy_clock)
                self.procs.append(subprocess.Popen([f"/usr/bin/swift-{name}-server", conf, "-v"], stdout=log,
                                                   stderr=subprocess.STDOUT, start_new_session=True, env=env))
                log.close()
            for name in ("account", "container", "object", "proxy"):
                self._wait_answering(ports[name], name)
        except BaseException:
            self.stop()
            raise

    def _wait_answering(self, port, name):
        # The port answers once the server runs; 60 s covers a loaded 2-core machine (not a timed assertion).
        for _ in range(6000):
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"a Swift server exited while starting: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.01)
        raise RuntimeError(f"swift {name} server on port {port} did not come up: {self.log_tail()}")

    def log_tail(self):
        out = []
        for name in ("account", "container", "object", "proxy"):
            try:
                with open(os.path.join(self.dir, f"{name}.log")) as f:
                    out.append(f"{name}: " + f.read()[-600:])
            except OSError:
                pass
        return "\n".join(out)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def s3(self, method, path, data=b"", secret=None):
        """One S3 request (path-style, SigV4) as the tempauth user: (status, body). How the tests set up
        and inspect buckets, by the same protocol kache speaks (Swift's own API needs memcached for tokens)."""
        return s3_request(self.endpoint, self.access_key, secret or self.secret_key, method, path, data)

    def create_bucket(self, name):
        status, body = self.s3("PUT", "/" + name)
        if status != 200:
            raise RuntimeError(f"creating bucket {name}: HTTP {status} {body[:300]!r}")

    def keys(self, bucket):
        """The object names stored in a bucket."""
        status, body = self.s3("GET", "/" + bucket)
        if status != 200:
            raise RuntimeError(f"listing bucket {bucket}: HTTP {status} {body[:300]!r}")
        return sorted(re.findall(r"<Key>([^<]*)</Key>", body.decode()))

    def get(self, bucket, key):
        return self.s3("GET", f"/{bucket}/{key}")[1]

    def put(self, bucket, key, data):
        status, body = self.s3("PUT", f"/{bucket}/{key}", data)
        if status != 200:
            raise RuntimeError(f"PUT {bucket}/{key}: HTTP {status} {body[:300]!r}")

    def stop(self):
        for p in getattr(self, "procs", []):
            if p.poll() is None:
                p.terminate()
        for p in getattr(self, "procs", []):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)


def s3_request(endpoint, access_key, secret, method, path, data=b"", region="us-east-1", when=None):
    """A path-style S3 request signed with SigV4 (AWS's published algorithm), for test set-up: (status, body)."""
    import datetime
    import hashlib
    import hmac
    import http.client
    import urllib.parse
    host = urllib.parse.urlsplit(endpoint).netloc
    now = when or datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(data).hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, path, "", *(f"{k}:{headers[k]}" for k in sorted(headers)), "", signed, payload])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope},SignedHeaders={signed},"
                                f"Signature={signature}")
    del headers["host"]
    conn = http.client.HTTPConnection(host, timeout=60)
    try:
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def pwd_name():
    import pwd
    return pwd.getpwuid(os.getuid()).pw_name


# --- remote execution (docs/remote-execution.md): PostgreSQL, BuildGrid and kache workers ---------------

BUILDGRID_VENV = os.environ.get("KACHE_BUILDGRID_VENV") or os.path.expanduser("~/.cache/kache-buildgrid")
BGD = os.path.join(BUILDGRID_VENV, "bin", "bgd")
# KACHE_POSTGRES_BIN: where initdb, pg_ctl and postgres are when not Debian's (the GPU machine's benchmark
# carries them; bench/README.md).
POSTGRES_BIN = os.environ.get("KACHE_POSTGRES_BIN") or "/usr/lib/postgresql/15/bin"


def missing_buildgrid():
    """A skip reason when BuildGrid (scripts/setup-tests.sh's venv) or PostgreSQL is not installed, else None."""
    if not os.access(BGD, os.X_OK):
        return f"BuildGrid is not installed in {BUILDGRID_VENV} (scripts/setup-tests.sh)"
    if not os.access(os.path.join(POSTGRES_BIN, "initdb"), os.X_OK):
        return "PostgreSQL 15 is not installed (scripts/setup-tests.sh)"
    return None


def _wait_for_line(path, text, proc, what, seconds=600):
    # An event, bounded for a loaded 2-core machine (BuildGrid's start takes ~30 s there): not a timed assertion.
    for _ in range(seconds * 20):
        try:
            with open(path, errors="replace") as f:
                if text in f.read():
                    return
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}) before '{text}'")
        time.sleep(0.05)
    raise RuntimeError(f"{what} never wrote '{text}'")


class Postgres(_Server):
    """PostgreSQL 15 in a private directory on a loopback port (BuildGrid's scheduler needs it), run as the
    `postgres` user when started by root (PostgreSQL refuses root)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="kache-pg-")
        os.chmod(self.dir, 0o777)
        self.port = free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        data = os.path.join(self.dir, "data")
        subprocess.run(self.as_user + [os.path.join(POSTGRES_BIN, "initdb"), "-D", data, "-A", "trust", "-U", "bgd"],
                       check=True, capture_output=True)
        subprocess.run(self.as_user + [os.path.join(POSTGRES_BIN, "pg_ctl"), "-D", data, "-w", "-l",
                                       os.path.join(self.dir, "log"), "-o",
                                       f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1", "start"],
                       check=True, capture_output=True)
        self.url = f"postgresql+psycopg2://bgd@127.0.0.1:{self.port}/postgres"

    def stop(self):
        subprocess.run(self.as_user + [os.path.join(POSTGRES_BIN, "pg_ctl"), "-D", os.path.join(self.dir, "data"),
                                       "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


BUILDGRID_CONFIG = """\
server:
  - !channel
    address: "127.0.0.1:{port}"
    insecure-mode: true
connections:
  - !sql-connection &sql
    connection-string: {db}
storages:
  - !lru-storage &cas
    size: 1024MB
caches:
  - !lru-action-cache &ac
    storage: *cas
    max-cached-refs: 4096
    allow-updates: true
    cache-failed-actions: false
  - !lru-action-cache &ac2
    storage: *cas
    max-cached-refs: 4096
    allow-updates: true
    cache-failed-actions: false
schedulers:
  - !sql-scheduler &sched
    sql: *sql
    storage: *cas
    action-cache: *ac
    property-set: !dynamic-property-set
      match-property-keys: []
      wildcard-property-keys: [OSFamily, kache-toolchain]
  - !sql-scheduler &sched2
    sql: *sql
    storage: *cas
    action-cache: *ac2
    property-set: !dynamic-property-set
      match-property-keys: []
      wildcard-property-keys: [OSFamily, kache-toolchain]
instances:
  - name: ""
    services:
      - !action-cache
        cache: *ac
      - !execution
        scheduler: *sched
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
  - name: "other"
    services:
      - !action-cache
        cache: *ac2
      - !execution
        scheduler: *sched2
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
"""


class BuildGrid(_Server):
    """BuildGrid (PyPI buildgrid, scripts/setup-tests.sh's venv) on a loopback port: in-memory CAS and ActionCache,
    the Execution and Bots services, its scheduler in a private PostgreSQL; a second instance, "other",
    with its own scheduler and ActionCache (one server start serves several scenarios). kache-toolchain
    is a wildcard property here, so that a worker of another toolchain receives actions and refuses them
    (the fallback the tests check); a production server makes it a match key (docs/remote-execution.md)."""

    def __init__(self):
        self.postgres = Postgres()
        self.dir = tempfile.mkdtemp(prefix="kache-bgd-")
        self.port = free_port()
        self.url = f"grpc://127.0.0.1:{self.port}"
        subprocess.run([BGD, "migrate", "apply", self.postgres.url], check=True, capture_output=True)
        config = os.path.join(self.dir, "bgd.yml")
        with open(config, "w") as f:
            f.write(BUILDGRID_CONFIG.format(port=self.port, db=self.postgres.url))
        self.log = os.path.join(self.dir, "bgd.log")
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([BGD, "server", "start", config], stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        _wait_for_line(self.log, "Starting BuildGrid server", self.proc, "BuildGrid")
        _wait_for_port(self.port, "BuildGrid")

    def kill(self):
        """Ends the server at once (the fallback tests)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        self.kill()
        self.postgres.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class KacheWorker(_Server):
    """`kache worker` serving `server_url`, with the toolchain id of nvcc (or the one given), and that of a
    gcc/clang `compiler` too when given: ready once its bot session exists. ran() counts the actions it
    ran, from its own log lines."""

    def __init__(self, kache, server_url, name, nvcc=None, toolchain_id=None, compiler=None, instance=None,
                 env=None):
        self.dir = tempfile.mkdtemp(prefix=f"kache-worker-{name}-")
        self.log = os.path.join(self.dir, "worker.log")
        args = [kache, "worker", "--server", server_url, "--work-dir", os.path.join(self.dir, "work"),
                "--bot-id", name]
        args += ["--nvcc", nvcc] if nvcc else ["--toolchain-id", toolchain_id] if toolchain_id else []
        args += ["--compiler", compiler] if compiler else []
        args += ["--instance", instance] if instance else []
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                         env=dict(os.environ, **(env or {})))
        _wait_for_line(self.log, "kache-worker: session", self.proc, f"kache worker {name}")

    def ran(self, program=None):
        with open(self.log, errors="replace") as f:
            lines = [l for l in f if l.startswith("kache-worker: ran ")]
        return [l for l in lines if program is None or l.split()[2] == program]

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__":
    # Smoke check of the helpers themselves: python3 tests/integration/servers.py
    import base64
    import ssl
    import urllib.error
    import urllib.request
    with Redis(password="pw", users={"alice": "a"}) as r:
        assert r.command("SET", "kache:k", b"\x00v") == b"OK" and r.get("kache:k") == b"\x00v"
        assert r.keys("kache:*") == ["kache:k"]
    with Nginx(basic_auth=("u", "p w")) as n:
        auth = "Basic " + base64.b64encode(b"u:p w").decode()
        req = urllib.request.Request(n.url + "/a/b", data=b"x", method="PUT", headers={"Authorization": auth})
        urllib.request.urlopen(req).close()
        assert n.stored_files() == ["a/b"]
        try:
            urllib.request.urlopen(n.url + "/a/b")
            raise AssertionError("no 401")
        except urllib.error.HTTPError as e:
            assert e.code == 401
    with Nginx(tls=True) as n:
        ctx = ssl.create_default_context(cafile=n.ca_cert)
        req = urllib.request.Request(n.url + "/k", data=b"tls", method="PUT")
        urllib.request.urlopen(req, context=ctx).close()
        assert urllib.request.urlopen(n.url + "/k", context=ctx).read() == b"tls"
    with BlackHole(full_backlog=True) as b:
        try:
            socket.create_connection(("127.0.0.1", b.port), timeout=0.2)
            raise AssertionError("connected")
        except (TimeoutError, socket.timeout):
            pass
    if not swift_missing():
        with Swift() as sw:
            sw.create_bucket("smoke")
            sw.put("smoke", "k", b"swift")
            assert sw.keys("smoke") == ["k"] and sw.get("smoke", "k") == b"swift"
    print("servers.py: redis, nginx (basic auth, tls), black hole and swift ok")
