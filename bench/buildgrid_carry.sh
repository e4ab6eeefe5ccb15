#!/bin/bash
# BuildGrid and PostgreSQL for the remote execution benchmark on the GPU machine (bench/remote_exec.py),
# which reaches no package registry: what scripts/setup-tests.sh installs here travels with the working tree.
#
#   bash bench/buildgrid_carry.sh pack      # here: .whl/ (BuildGrid's wheels for the GPU machine's Python
#                                           # 3.12) and .gpu-carry/pg.tar.xz (Debian's PostgreSQL 15, its
#                                           # libraries beside it); both ignored by git, carried by the call
#   source bench/buildgrid_carry.sh unpack  # there: installs both under /tmp and exports
#                                           # KACHE_BUILDGRID_VENV and KACHE_POSTGRES_BIN for tests/integration/servers.py
#
# boto3/botocore are stand-ins (.whl/stubs): BuildGrid imports them for S3 storage, which the benchmark's
# configuration does not use, and they are a third of the wheels' size.
set -e
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

pack() {
    local PG=/usr/lib/postgresql/15 stage
    mkdir -p "$ROOT/.whl" "$ROOT/.gpu-carry"
    (cd "$ROOT/.whl" && python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d . buildgrid==0.4.4 psycopg2-binary==2.9.13 &&
        rm -f boto3-*.whl botocore-*.whl s3transfer-*.whl jmespath-*.whl)
    mkdir -p "$ROOT/.whl/stubs/boto3" "$ROOT/.whl/stubs/botocore"
    echo 'def client(*args, **kwargs): raise RuntimeError("boto3 is not carried to the benchmark machine")' \
        >"$ROOT/.whl/stubs/boto3/__init__.py"
    : >"$ROOT/.whl/stubs/botocore/__init__.py"
    printf 'class Config:\n    def __init__(self, *args, **kwargs):\n        pass\n' >"$ROOT/.whl/stubs/botocore/config.py"
    printf 'class ClientError(Exception):\n    pass\n' >"$ROOT/.whl/stubs/botocore/exceptions.py"
    # PostgreSQL finds its share/ and lib/ relative to its binary: keep Debian's layout under one root.
    stage=$(mktemp -d)
    chmod 755 "$stage"  # the archive's top: PostgreSQL runs as its own user there
    mkdir -p "$stage/usr/lib/postgresql/15/bin" "$stage/usr/share/postgresql" "$stage/libs" "$stage/zoneinfo"
    cp "$PG/bin/postgres" "$PG/bin/initdb" "$PG/bin/pg_ctl" "$stage/usr/lib/postgresql/15/bin/"
    cp -r "$PG/lib" "$stage/usr/lib/postgresql/15/lib"
    rm -rf "$stage/usr/lib/postgresql/15/lib/bitcode" "$stage"/usr/lib/postgresql/15/lib/llvmjit*
    cp -r /usr/share/postgresql/15 "$stage/usr/share/postgresql/15"
    rm -rf "$stage/usr/share/postgresql/15/man" "$stage/usr/share/postgresql/15/contrib"
    for b in postgres initdb pg_ctl; do ldd "$PG/bin/$b"; done | awk '{print $3}' | sort -u | grep . |
        grep -Ev 'lib(c|m|gcc_s|stdc\+\+|resolv|z)\.so' | xargs -I{} cp -L {} "$stage/libs/"
    cp -L /usr/share/zoneinfo/UTC "$stage/zoneinfo/UTC"
    XZ_OPT='-9 -T0' tar -C "$stage" -cJf "$ROOT/.gpu-carry/pg.tar.xz" .
    rm -rf "$stage"
    du -sh "$ROOT/.whl" "$ROOT/.gpu-carry/pg.tar.xz"
}

unpack() {
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/bg-site \
        "$ROOT"/.whl/*.whl
    if [ ! -x /tmp/pg/usr/lib/postgresql/15/bin/postgres ]; then
        mkdir -p /tmp/pg && tar -C /tmp/pg -xJf "$ROOT/.gpu-carry/pg.tar.xz"
    fi
    [ -e /usr/share/zoneinfo/UTC ] || { mkdir -p /usr/share/zoneinfo && cp /tmp/pg/zoneinfo/UTC /usr/share/zoneinfo/; }
    id postgres >/dev/null 2>&1 || useradd -r -M postgres
    mkdir -p /tmp/pg/wrap /tmp/bg-venv/bin
    for b in postgres initdb pg_ctl; do
        printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/pg/libs TZ=UTC LC_ALL=C exec /tmp/pg/usr/lib/postgresql/15/bin/%s "$@"\n' \
            "$b" >/tmp/pg/wrap/$b
        chmod 755 /tmp/pg/wrap/$b
    done
    printf '#!/bin/sh\nPYTHONPATH=/tmp/bg-site:%s exec %s -c "import sys; from buildgrid.server.app import cli; sys.argv[0] = \\"bgd\\"; sys.exit(cli())" "$@"\n' \
        "$ROOT/.whl/stubs" "$(command -v python3)" >/tmp/bg-venv/bin/bgd
    chmod 755 /tmp/bg-venv/bin/bgd
    export KACHE_BUILDGRID_VENV=/tmp/bg-venv KACHE_POSTGRES_BIN=/tmp/pg/wrap
}

"$@"
