#!/usr/bin/env bash
# The README's second command (and all that CI runs): install the Debian test services
# when missing, refresh ./.venv with the test and docs extras, then run ruff, mypy, the layers
# contract (lint-imports), the docs build (mkdocs --strict), the dashboard's front end
# (eslint and a rebuild that must match the committed files) and pytest.
# Every check runs even when an earlier one fails; the exit status is non-zero if any
# failed. Arguments go to pytest, e.g. `./scripts/test.sh tests/unit -k trie`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/run-local.sh
source "$ROOT/scripts/run-local.sh"

"$ROOT/scripts/install-services.sh"
ensure_venv test,spark,docs
# With a C compiler the install compiles the pure layers with mypyc (setup.py): the tests
# then require it (tests/unit/test_build.py), so that a broken build cannot pass as pure Python.
compiler=${CC:-cc}
if [[ ${MQTTQ_COMPILE:-1} != 0 ]] && command -v "${compiler%% *}" >/dev/null; then
    export MQTTQ_TEST_EXPECT_COMPILED=1
fi
# Kafka's jars from Maven Central, once (cached outside the tree): the Kafka tests start nodes
# with scripts/kafka-local.sh, and the first start should not spend a test's time fetching.
"$ROOT/scripts/kafka-local.sh" fetch

failed=()
check() {
    local name=$1
    shift
    echo "==> $name" >&2
    if ! "$@"; then
        failed+=("$name")
    fi
}

# The dashboard's front end, in the background while the Python checks run (npm ci is mostly
# network): eslint, then the build, whose output must be the committed files byte for byte.
dashboard_log=$(mktemp)
if command -v npm >/dev/null 2>&1; then
    { "$ROOT/scripts/build-dashboard.sh" &&
        git diff --exit-code --stat -- mqttq/admin/dashboard/static; } >"$dashboard_log" 2>&1 &
    dashboard_pid=$!
else
    dashboard_pid=
    echo "==> dashboard build: skipped (no npm; the committed files are served)" >&2
fi

check "ruff check" "$VENV/bin/ruff" check mqttq tests benchmarks docs/hooks
check "ruff format" "$VENV/bin/ruff" format --check mqttq tests benchmarks docs/hooks
check "mypy" "$VENV/bin/mypy"
# The layers contract (.importlinter): imports point down the floors.
check "lint-imports" "$VENV/bin/lint-imports"
# The documentation site: a broken link or a page missing from the nav fails the build.
check "mkdocs build" env NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --quiet --site-dir "$ROOT/site"
if [[ -n $dashboard_pid ]]; then
    echo "==> dashboard build (eslint, esbuild, same files as committed)" >&2
    if ! wait "$dashboard_pid"; then
        cat "$dashboard_log" >&2
        failed+=("dashboard build")
    fi
fi
rm -f "$dashboard_log"
if ((${#failed[@]} > 0)); then
    echo "==> failed so far: ${failed[*]} (running the tests anyway)" >&2
fi

echo "==> pytest" >&2
status=0
# Three workers (pytest-xdist) on two cores: most tests wait on sockets, brokers and Kafka's
# groups, not on the CPU (the run keeps about one core busy on two workers). Kafka's and
# Spark's tests each stay on one worker (xdist_group, tests/conftest.py), so each JVM
# starts once; the third takes the rest.
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "${MQTTQ_TEST_WORKERS:-3}" --dist loadgroup "$@" || status=$?
case $status in
    0) ;;
    5)
        echo "pytest collected no tests: that is a failure here" >&2
        failed+=("pytest")
        ;;
    *) failed+=("pytest") ;;
esac

if ((${#failed[@]} > 0)); then
    echo "test.sh: FAILED: ${failed[*]}" >&2
    exit 1
fi
