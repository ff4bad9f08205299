#!/bin/sh
exec "$(dirname "$0")/kafka-run-class.sh" kafka.admin.ConfigCommand "$@"
