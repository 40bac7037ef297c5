#!/usr/bin/env bash
# Install the Debian packages the tests drive (mosquitto, mosquitto-clients, redis-server,
# postgresql, and Java 17 + Maven for Kafka and Spark: scripts/kafka-local.sh fetches Kafka's
# jars from Maven Central with mvn; haproxy in front of the PROXY protocol listener; chromium,
# the browser the dashboard tests drive through Playwright).
# Idempotent and quiet: nothing happens when they are present; otherwise one
# `apt-get update` and one `apt-get install`, as root or through sudo.
#
# Sourcing this file only defines the functions (scripts/run-local.sh uses
# `ensure_python_venv`); running it installs the test services.
set -euo pipefail

# `ensure_debian_packages BINARY:PACKAGE ...`: install each PACKAGE whose BINARY is missing.
# A BINARY may be a path (/usr/sbin/mosquitto is not on a normal user's PATH).
ensure_debian_packages() {
    local missing=() entry binary package
    for entry in "$@"; do
        binary=${entry%%:*}
        package=${entry#*:}
        if [[ $binary == /* ]]; then
            [[ -x $binary ]] && continue
        else
            command -v "$binary" >/dev/null 2>&1 && continue
        fi
        [[ " ${missing[*]} " == *" $package "* ]] || missing+=("$package")
    done
    ((${#missing[@]} == 0)) && return 0
    apt_install "${missing[@]}"
}

# `postgres_initdb`: the newest installed PostgreSQL's initdb. Debian keeps the server
# programs off the PATH, under /usr/lib/postgresql/<version>/bin; when none is installed,
# a path that does not exist (so that `ensure_debian_packages` installs the package).
postgres_initdb() {
    local found
    found=$(compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -n 1) || true
    echo "${found:-/usr/lib/postgresql/none/bin/initdb}"
}

# `ensure_python_venv`: make `$PYTHON -m venv` work (Debian ships ensurepip separately).
ensure_python_venv() {
    local python=${PYTHON:-python3}
    if ! command -v "$python" >/dev/null 2>&1; then
        echo "$python not found: install Python 3.11 or newer (Debian: apt-get install python3)" >&2
        return 1
    fi
    "$python" -c 'import ensurepip, venv' >/dev/null 2>&1 && return 0
    if [[ $(readlink -f "$(command -v "$python")") == /usr/bin/python3* ]]; then
        apt_install python3-venv
        "$python" -c 'import ensurepip, venv' >/dev/null 2>&1 && return 0
    fi
    echo "$python cannot create virtualenvs (no ensurepip); use another Python via PYTHON=..." >&2
    return 1
}

# `apt_install PACKAGE ...`: one quiet `apt-get update` + `apt-get install`; the log is
# shown only when it fails.
apt_install() {
    local sudo=()
    if ((EUID != 0)); then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "missing: $*; install them as root: apt-get install $*" >&2
            return 1
        fi
        # Non-interactive runs (CI) must fail rather than wait for a password.
        if [[ -t 0 ]]; then sudo=(sudo); else sudo=(sudo -n); fi
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "missing: $*; this is not Debian: install them with your package manager" >&2
        return 1
    fi
    echo "installing Debian packages: $*" >&2
    local log
    log=$(mktemp)
    if ! { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "$@"; } >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "apt-get failed to install: $*" >&2
        return 1
    fi
    rm -f "$log"
    _stop_packaged_services "${sudo[@]}" -- "$@"
}

# The packages start a system-wide mosquitto (port 1883), redis (6379) and postgresql
# (5432) under systemd.
# The tests start their own servers on free ports, and a system mosquitto on 1883 would
# keep `mqttq serve` from starting: stop and disable the services just installed.
_stop_packaged_services() {
    local sudo=()
    while [[ $1 != -- ]]; do
        sudo+=("$1")
        shift
    done
    shift
    [[ -d /run/systemd/system ]] || return 0
    local package
    for package in "$@"; do
        case $package in
            mosquitto | redis-server | postgresql | haproxy)
                if "${sudo[@]}" systemctl disable --now "$package" >/dev/null 2>&1; then
                    echo "stopped and disabled the system $package service (tests run their own)" >&2
                fi
                ;;
        esac
    done
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    ensure_debian_packages \
        /usr/sbin/mosquitto:mosquitto \
        mosquitto_pub:mosquitto-clients \
        mosquitto_sub:mosquitto-clients \
        redis-server:redis-server \
        "$(postgres_initdb)":postgresql \
        java:openjdk-17-jre-headless \
        mvn:maven \
        /usr/sbin/haproxy:haproxy \
        chromium:chromium
fi
