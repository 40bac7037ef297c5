#!/usr/bin/env bash
# A local Apache Kafka (one KRaft node: broker + controller) on 127.0.0.1, for the tests, the
# benchmarks and a developer's distributed setup. No Docker, no download outside Maven Central:
#
#   scripts/kafka-local.sh fetch              the jars into the cache (once; later runs reuse it)
#   scripts/kafka-local.sh start DIR [PORT]   format KRaft storage in DIR (first start only), start
#                                             the node on PORT (a free one when not given; the
#                                             port of DIR's earlier start on a restart), wait until
#                                             a produce with acks=all works; last line printed:
#                                             bootstrap=127.0.0.1:<port>
#   scripts/kafka-local.sh stop DIR           SIGTERM the node DIR runs, SIGKILL after a bound
#   scripts/kafka-local.sh kill DIR           SIGKILL it at once (a throwaway node: its data
#                                             may be left half-written)
#
# The broker and its runtime jars (org.apache.kafka:kafka_2.13 and an SLF4J binding) come from
# Maven Central through `mvn dependency:copy-dependencies` and are cached outside the work tree,
# in $MQTTQ_KAFKA_CACHE or ~/.cache/mqttq/kafka-<version>. Java 17 and Maven must be installed
# (scripts/install-services.sh installs them on Debian). Several nodes may run at once, each
# with its own DIR and ports. Environment: MQTTQ_KAFKA_VERSION (default 4.1.0),
# MQTTQ_KAFKA_HEAP (default 512m), MQTTQ_KAFKA_START_TIMEOUT (seconds, default 90).
set -euo pipefail

VERSION=${MQTTQ_KAFKA_VERSION:-4.1.0}
SLF4J_VERSION=1.7.36
CACHE=${MQTTQ_KAFKA_CACHE:-$HOME/.cache/mqttq/kafka-$VERSION}
HEAP=${MQTTQ_KAFKA_HEAP:-512m}
START_TIMEOUT=${MQTTQ_KAFKA_START_TIMEOUT:-90}
STOP_TIMEOUT=20
HOST=127.0.0.1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() {
    echo "kafka-local.sh: $*" >&2
    exit 1
}

usage() {
    sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# `fetch`: the jars in $CACHE/libs, fetched once. A lock keeps two concurrent first starts
# from fetching into the same place; the jars appear under libs/ only when all are there.
fetch() {
    [[ -f $CACHE/libs/.complete ]] && return 0
    command -v java >/dev/null 2>&1 || die "java not found: install Java 17 (Debian: apt-get install openjdk-17-jre-headless)"
    command -v mvn >/dev/null 2>&1 || die "mvn not found: install Maven (Debian: apt-get install maven)"
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.lock"
    flock 9
    if [[ -f $CACHE/libs/.complete ]]; then
        flock -u 9
        return 0
    fi
    local work
    work=$(mktemp -d)
    cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.mqttq</groupId>
  <artifactId>kafka-local</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>$SLF4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
    echo "fetching Apache Kafka $VERSION from Maven Central into $CACHE (once)" >&2
    rm -rf "$CACHE/libs.partial"
    if ! mvn -q -B -f "$work/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$CACHE/libs.partial" >"$work/mvn.log" 2>&1; then
        cat "$work/mvn.log" >&2
        rm -rf "$work" "$CACHE/libs.partial"
        die "mvn could not fetch org.apache.kafka:kafka_2.13:$VERSION"
    fi
    rm -rf "$work" "$CACHE/libs"
    touch "$CACHE/libs.partial/.complete"
    mv "$CACHE/libs.partial" "$CACHE/libs"
    flock -u 9
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# `alive PID`: the process exists and is not a zombie (an exited node whose parent, the
# shell that started it, is gone may wait a while to be reaped).
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    [[ $(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) != Z ]]
}

# `running DIR`: true when DIR's recorded PID is a live Kafka of DIR.
running() {
    local pid
    [[ -f $1/kafka.pid ]] || return 1
    pid=$(<"$1/kafka.pid")
    [[ -n $pid ]] && alive "$pid" && grep -q "kafka.Kafka" "/proc/$pid/cmdline" 2>/dev/null
}

write_config() {
    local dir=$1 port=$2 controller_port=$3
    cat >"$dir/server.properties" <<EOF
# Written by scripts/kafka-local.sh: one KRaft node (broker + controller) on loopback.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$controller_port
listeners=PLAINTEXT://$HOST:$port,CONTROLLER://$HOST:$controller_port
advertised.listeners=PLAINTEXT://$HOST:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
EOF
    cat >"$dir/log4j.properties" <<EOF
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$dir/kafka.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
log4j.logger.kafka.server.BrokerServer=INFO
EOF
    # The short-lived tools (format, the readiness probe) log errors only, to their own output.
    cat >"$dir/log4j-tools.properties" <<EOF
log4j.rootLogger=ERROR, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=%p %m%n
EOF
}

# `port_open PORT`: something accepts TCP connections on $HOST:PORT.
port_open() {
    (: <"/dev/tcp/$HOST/$1") 2>/dev/null
}

# `probe_classes`: prints the directory of the compiled readiness probe, compiled once into
# the cache (a `java Probe.java` source launch would compile it again on every attempt).
probe_classes() {
    local classes=$CACHE/probe-classes
    if [[ ! -f $classes/Probe.class ]]; then
        local work
        work=$(mktemp -d)
        write_probe "$work"
        mkdir -p "$work/classes"
        # javac as the runtime's own module (a JRE has no javac command); its class path
        # spelled out, as only the java launcher expands `libs/*`.
        local jars
        jars=$(printf '%s:' "$CACHE"/libs/*.jar)
        if ! java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
            --module jdk.compiler/com.sun.tools.javac.Main -nowarn -cp "$jars" \
            -d "$work/classes" "$work/Probe.java" >"$work/javac.log" 2>&1; then
            cat "$work/javac.log" >&2
            rm -rf "$work"
            die "compiling the readiness probe failed"
        fi
        # Concurrent first starts: each compiles its own, the rename is atomic.
        mv -T "$work/classes" "$classes" 2>/dev/null || true
        rm -rf "$work"
    fi
    echo "$classes"
}

# The Java probe: produce one record with acks=all; exit 0 once it is acknowledged.
write_probe() {
    cat >"$1/Probe.java" <<'EOF'
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public class Probe {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("acks", "all");
        p.put("delivery.timeout.ms", args[1]);
        p.put("request.timeout.ms", "3000");
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.send(new ProducerRecord<>("mqttq.ready", "probe", "ready")).get();
        }
    }
}
EOF
}

start() {
    local dir=${1:-} port=${2:-}
    [[ -n $dir ]] || usage
    fetch
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    running "$dir" && die "a Kafka node already runs in $dir (pid $(<"$dir/kafka.pid")); stop it first"
    local controller_port
    if [[ -f $dir/ports ]]; then # a restart: the same ports (the quorum and the clients know them)
        read -r old_port controller_port <"$dir/ports"
        [[ -z $port || $port == "$old_port" ]] || die "$dir was formatted for port $old_port, not $port"
        port=$old_port
    else
        [[ -n $port ]] || port=$(free_port)
        controller_port=$(free_port)
        while [[ $controller_port == "$port" ]]; do controller_port=$(free_port); done
        write_config "$dir" "$port" "$controller_port"
        echo "$port $controller_port" >"$dir/ports"
    fi
    local classpath="$CACHE/libs/*"
    # The short-lived tools (format, the probe) run a few seconds: C1 only, one GC thread.
    local jvm=(java "-Xmx$HEAP" -Xms128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
        "-Dlog4j.configuration=file:$dir/log4j-tools.properties")
    if [[ ! -f $dir/data/meta.properties ]]; then
        # `kafka-storage.sh random-uuid` without a JVM of its own: 16 random bytes in
        # URL-safe base64 without padding, never starting with '-' (as Kafka's Uuid does).
        local cluster_id
        cluster_id=$(python3 -c 'import base64, uuid
while True:
    text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not text.startswith("-"):
        break
print(text)')
        if ! "${jvm[@]}" -cp "$classpath" kafka.tools.StorageTool format -t "$cluster_id" \
            -c "$dir/server.properties" >"$dir/format.log" 2>&1; then
            cat "$dir/format.log" >&2
            die "formatting KRaft storage in $dir failed"
        fi
    fi
    # TieredStopAtLevel=1 only for the short-lived tools above: the node gets the full JIT.
    nohup java "-Xmx$HEAP" -Xms128m -XX:+UseG1GC \
        "-Dlog4j.configuration=file:$dir/log4j.properties" -cp "$classpath" \
        kafka.Kafka "$dir/server.properties" >"$dir/stdout.log" 2>&1 </dev/null &
    echo $! >"$dir/kafka.pid"
    local probe_classes
    probe_classes=$(probe_classes)
    local deadline=$((SECONDS + START_TIMEOUT))
    # The probe is a JVM of its own: first wait (cheaply) until the node listens at all.
    until port_open "$port" || ((SECONDS > deadline)) || ! running "$dir"; do
        sleep 0.2
    done
    until "${jvm[@]}" -cp "$probe_classes:$classpath" Probe "$HOST:$port" 5000 >"$dir/probe.log" 2>&1; do
        if ! running "$dir"; then
            tail -n 40 "$dir/stdout.log" "$dir/kafka.log" >&2 2>/dev/null || true
            die "Kafka in $dir exited during start-up (logs above)"
        fi
        if ((SECONDS > deadline)); then
            tail -n 20 "$dir/probe.log" >&2 || true
            stop "$dir"
            die "Kafka in $dir accepted no produce within ${START_TIMEOUT} s"
        fi
        sleep 0.5
    done
    echo "bootstrap=$HOST:$port"
}

stop() {
    local dir=${1:-}
    [[ -n $dir ]] || usage
    [[ -d $dir ]] || die "no such directory: $dir"
    if ! running "$dir"; then
        rm -f "$dir/kafka.pid"
        return 0
    fi
    local pid signal=${2:-TERM}
    pid=$(<"$dir/kafka.pid")
    kill "-$signal" "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "$pid"; do
        if ((SECONDS > deadline)); then
            echo "kafka-local.sh: Kafka (pid $pid) did not stop on SIGTERM within ${STOP_TIMEOUT} s: SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    while alive "$pid"; do sleep 0.1; done
    rm -f "$dir/kafka.pid"
}

case ${1:-} in
    fetch) fetch ;;
    start) start "${2:-}" "${3:-}" ;;
    stop) stop "${2:-}" ;;
    kill) stop "${2:-}" KILL ;;
    *) usage ;;
esac
