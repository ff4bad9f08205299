#!/usr/bin/env bash
# Runs a Kafka class on the image's jars, with the distribution's variables: KAFKA_HEAP_OPTS,
# KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS and KAFKA_OPTS (tools log warnings to stderr by default).
set -euo pipefail
home=/opt/kafka
main=$1
shift
heap=${KAFKA_HEAP_OPTS:--Xmx256M}
performance=${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}
logging=${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$home/config/tools-log4j2.yaml}
# shellcheck disable=SC2086  # each variable holds several JVM options, split as the distribution does
exec java $heap $performance $logging ${KAFKA_OPTS:-} -cp "$home/libs/*" "$main" "$@"
