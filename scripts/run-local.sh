#!/usr/bin/env bash
# The README's first command: install mqttq into ./.venv and run `mqttq serve` on its
# embedded defaults (127.0.0.1:1883, SQLite under ./mqttq-data). Arguments go to
# `mqttq serve`, e.g. `./scripts/run-local.sh --port 1884 --log-format text`.
#
# The same as `python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/mqttq serve`,
# plus: python3-venv is installed on Debian when missing, and pip runs only when what the
# install depends on changed since the last one: pyproject.toml, setup.py, the sources mypyc
# compiles, MQTTQ_COMPILE. Set PYTHON to use another interpreter.
#
# Prints what it does while installing (the step, pip's progress, a line every 15 s while
# mypyc compiles), then the broker prints one `mqttq listening on ...` line.
#
# Sourcing this file only defines `ensure_venv` and its helpers (scripts/test.sh uses it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$ROOT/.venv
# shellcheck source=scripts/install-services.sh
source "$ROOT/scripts/install-services.sh"

# `ensure_venv [EXTRAS]`: ./.venv exists and has `pip install -e .[EXTRAS]` of this tree.
ensure_venv() {
    local extras=${1:-}
    local target=$ROOT
    [[ -n $extras ]] && target="$ROOT[$extras]"
    if [[ -d $VENV ]] && ! "$VENV/bin/python" -c '' >/dev/null 2>&1; then
        echo "recreating $VENV (its Python does not run)" >&2
        rm -rf "$VENV"
    fi
    if [[ ! -x $VENV/bin/python ]]; then
        ensure_python_venv
        local python=${PYTHON:-python3}
        if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
            echo "mqttq needs Python 3.11 or newer; $python is $("$python" -V 2>&1)" >&2
            return 1
        fi
        echo "creating $VENV" >&2
        "$python" -m venv "$VENV"
    fi
    # Reinstall when the dependencies, the extras or the build change. Most code changes need
    # nothing (editable install), but the modules mypyc compiles run from extensions built at
    # install time: an edit to one of their sources needs a new build (see mqttq/build.py),
    # and so does a source rewritten as it was (a branch switched and back): mqttq would warn
    # at every import that its extension is older.
    local stamp=$VENV/.mqttq-install
    local digest installed="" sources
    sources=$("$VENV/bin/python" "$ROOT/mqttq/build.py" --sources) || return 1
    # shellcheck disable=SC2086  # one path per word
    digest=$(
        cd "$ROOT" &&
            { echo "MQTTQ_COMPILE=${MQTTQ_COMPILE:-1}"; sha256sum pyproject.toml setup.py $sources; } |
            sha256sum | cut -d' ' -f1
    )
    [[ -f $stamp ]] && installed=$(<"$stamp")
    # "<digest> <extras>": an install with extras also serves a run without them.
    if [[ $installed == "$digest ${extras:-}" || (-z $extras && $installed == "$digest "*) ]] &&
        "$VENV/bin/python" "$ROOT/mqttq/build.py" --fresh; then
        return 0
    fi
    install_notice "$extras" "$(wc -w <<<"$sources")" >&2
    # pip's own lines (what it fetches, the build, what it installed) show progress; its
    # per-package "already satisfied" chatter does not. Errors (stderr) are never filtered.
    with_heartbeat "installing mqttq" "$VENV/bin/python" -m pip install --progress-bar off \
        -e "$target" | { grep --line-buffered -E "$PIP_PROGRESS" || true; } >&2
    "$VENV/bin/python" "$ROOT/mqttq/build.py" >&2 # compiled or pure: pip hides the build output
    echo "$digest ${extras:-}" >"$stamp"
}

PIP_PROGRESS='^(Collecting|Downloading|Building|Successfully installed)'
# Seconds between the "still ..." lines of `with_heartbeat`.
HEARTBEAT_SECONDS=${HEARTBEAT_SECONDS:-15}

# `install_notice EXTRAS N`: the line saying what the install does and how long it takes,
# N being the number of modules mypyc compiles (unless MQTTQ_COMPILE=0).
install_notice() {
    local extras=$1 modules=$2
    if [[ ${MQTTQ_COMPILE:-1} == 0 ]]; then
        echo "installing mqttq${extras:+[$extras]} into $VENV: its dependencies, then mqttq" \
            "as pure Python (MQTTQ_COMPILE=0); about a minute"
    else
        echo "installing mqttq${extras:+[$extras]} into $VENV: its dependencies, then mypyc" \
            "compiles $modules modules to C (2-4 minutes on a first run; MQTTQ_COMPILE=0" \
            "installs pure Python at once)"
    fi
}

# `with_heartbeat WHAT COMMAND...`: run COMMAND, printing "  ... still WHAT (N s)" on
# stderr every HEARTBEAT_SECONDS while it runs; its exit status is COMMAND's.
with_heartbeat() {
    local what=$1 status=0
    shift
    (
        # Each sleep in the background and waited for, so that the kill below ends the loop
        # at once (bash holds a signal until a foreground child ends: up to a whole beat
        # after COMMAND) and takes the sleep with it (which would hold stderr open).
        trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
        elapsed=0
        while :; do
            sleep "$HEARTBEAT_SECONDS" &
            sleeper=$!
            wait "$sleeper"
            elapsed=$((elapsed + HEARTBEAT_SECONDS))
            echo "  ... still $what (${elapsed} s)"
        done
    ) >&2 & # not on stdout: that may be a pipe, which a sleep would hold open

    local beat=$!
    "$@" || status=$?
    kill "$beat" 2>/dev/null || true
    wait "$beat" 2>/dev/null || true
    return "$status"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    ensure_venv
    exec "$VENV/bin/mqttq" serve "$@"
fi
