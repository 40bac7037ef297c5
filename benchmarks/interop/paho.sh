#!/usr/bin/env bash
# Eclipse Paho's interoperability suites (paho.mqtt.testing: client_test.py for 3.1.1,
# client_test5.py for 5.0) against a real mqttq broker started here on a free port.
#
#   benchmarks/interop/paho.sh PATH-TO-paho.mqtt.testing [--cluster]
#
# The suites are not on PyPI: clone https://github.com/eclipse/paho.mqtt.testing first (CI
# cannot reach GitHub, so this is a check run by hand; its results are in docs/benchmarks.md).
# The broker is set up as the suites expect of theirs: subscriptions to `test/nosubscribe`
# refused (test_subscribe_failure), `$TopicA/B` open to publishers (test_dollar_topics: a filter
# `#` does not cover `$` topics in an ACL either) and a server keep-alive of 60 s
# (test_server_keep_alive). One 5.0 test stays red by design: test_subscribe_failure wants
# SUBACK 0x80 (Unspecified error) where mqttq answers 0x87 (Not authorized), the code
# MQTT 5.0 section 3.9.3 gives for a refused subscription.
set -euo pipefail

usage() { echo "usage: $0 PATH-TO-paho.mqtt.testing" >&2; exit 2; }
(($# >= 1)) || usage
suites="$(cd "$1" && pwd)/interoperability"
[[ -f $suites/client_test5.py ]] || { echo "$suites/client_test5.py not found: is $1 a paho.mqtt.testing checkout?" >&2; exit 2; }

root="$(cd "$(dirname "$0")/../.." && pwd)"
python="$root/.venv/bin/python"
work="$(mktemp -d)"
trap 'kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true; rm -rf "$work"' EXIT

cat >"$work/broker.toml" <<TOML
[listener]
host = "127.0.0.1"
port = 0

[mqtt]
max_keep_alive = 60

[auth]
anonymous = "always"

[[auth.anonymous_acl]]
permission = "deny"
action = "subscribe"
topic = "test/nosubscribe"

[[auth.anonymous_acl]]
permission = "allow"
action = "all"
topic = "#"

[[auth.anonymous_acl]]
permission = "allow"
action = "publish"
topic = "\$TopicA/#"
TOML

"$root/.venv/bin/mqttq" serve --config "$work/broker.toml" --data-dir "$work/data" \
    --ready-file "$work/ready" >"$work/broker.log" 2>&1 &
broker=$!
for _ in $(seq 100); do [[ -s $work/ready ]] && break; sleep 0.1; done
[[ -s $work/ready ]] || { cat "$work/broker.log" >&2; echo "the broker did not start" >&2; exit 1; }
port=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["mqtt_port"])' "$work/ready")

# client_test.py hands sys.argv to unittest.main() after reading -p itself: give unittest
# only the program name.
run_suite() {
    (cd "$suites" && "$python" - "$1" "$port" <<'PY'
import runpy, sys, unittest
script, port = sys.argv[1], sys.argv[2]
run = unittest.main
unittest.main = lambda *args, **kwargs: run(*args, argv=[script], **kwargs)
sys.argv = [script, "-p", port]
runpy.run_path(script, run_name="__main__")
PY
    )
}

status=0
for suite in client_test.py client_test5.py; do
    echo "== $suite against mqttq on 127.0.0.1:$port"
    run_suite "$suite" 2>&1 | grep -E '^(FAIL|ERROR):|^Ran |^OK|^FAILED' || true
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
done
exit $status
