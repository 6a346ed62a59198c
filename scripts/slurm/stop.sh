#!/usr/bin/env bash
# Stop the test cluster that scripts/slurm/start.sh started: each daemon by the pid in its own pid
# file, in reverse order. Its directory stays (state, accounting database, logs); pass --purge to
# remove it too.
set -euo pipefail

DIR=${FWBENCH_SLURM_DIR:-/tmp/fwbench-slurm}

stop() {  # stop NAME PIDFILE
    local pid
    [ -f "$2" ] || return 0
    pid=$(cat "$2")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
        echo "scripts/slurm/stop.sh: stopped $1 ($pid)"
    fi
    rm -f "$2"
}

stop slurmd "$DIR/run/slurmd.pid"
stop slurmctld "$DIR/run/slurmctld.pid"
stop slurmdbd "$DIR/run/slurmdbd.pid"
stop mariadbd "$DIR/mysql/mariadbd.pid"
stop munged "$DIR/munge/munged.pid"
if [ -L /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$DIR/slurm.conf" ]; then
    rm -f /etc/slurm/slurm.conf
fi
if [ "${1:-}" = "--purge" ]; then rm -rf "$DIR"; fi
