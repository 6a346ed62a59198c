#!/usr/bin/env bash
# Start a single-node SLURM cluster for tests, from Debian's packages (scripts/slurm/install.sh):
# MariaDB, slurmdbd, slurmctld and slurmd with their configuration, state and logs under one
# directory and on ports of their own; /var/lib/mysql is not touched; /etc/slurm/slurm.conf becomes a
# link to the private configuration (only where no other configuration is there: see below);
# munged on the machine's socket (/run/munge), started if not running. Accounting is on: sacct answers, as the Snakemake SLURM executor needs.
#
#   scripts/slurm/start.sh            # prints the line to source: export SLURM_CONF=...
#   . "${FWBENCH_SLURM_DIR:-/tmp/fwbench-slurm}/env.sh"; sinfo; sacct
#   scripts/slurm/stop.sh
#
# Settings (environment): FWBENCH_SLURM_DIR (default /tmp/fwbench-slurm), FWBENCH_SLURM_PORT_BASE
# (default 16817: slurmctld, +1 slurmd, +2 slurmdbd, +3 MariaDB). Needs root (the daemons run as
# root, the simplest set-up a throw-away test cluster allows). Idempotent: a running cluster in
# the same directory is left as it is.
set -euo pipefail

DIR=${FWBENCH_SLURM_DIR:-/tmp/fwbench-slurm}
BASE=${FWBENCH_SLURM_PORT_BASE:-16817}
CTLD_PORT=$BASE; SLURMD_PORT=$((BASE + 1)); DBD_PORT=$((BASE + 2)); DB_PORT=$((BASE + 3))
CLUSTER=fwbench
ACCOUNT=fwbench
NODE=$(hostname -s)
DB_PASSWORD=fwbench-test-only

say() { echo "scripts/slurm/start.sh: $*"; }
die() { echo "scripts/slurm/start.sh: $*" >&2; exit 1; }
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds=$1 what=$2; shift 2
    for _ in $(seq "$((seconds * 5))"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    die "$what did not come up within ${seconds}s; see $DIR/log"
}

for tool in munged mariadbd mariadb-install-db slurmdbd slurmctld slurmd sacctmgr sinfo sacct; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] \
        || die "$tool is missing: run scripts/slurm/install.sh (as root) first"
done
[ "$(id -u)" -eq 0 ] || die "must run as root (the test cluster's daemons run as root)"
export PATH=/usr/sbin:$PATH

mkdir -p "$DIR"/{log,run,state,spool,munge,mysql}
export SLURM_CONF=$DIR/slurm.conf

# --- munge: the machine's socket (Slurm's clients look for it there); started here if absent ----
# (slurm.conf's AuthInfo=socket= is not honoured by every 22.05 client, so no private socket.)
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    install -d -o munge -g munge -m 755 /run/munge
    chown munge:munge "$DIR/munge"
    runuser -u munge -- munged --pid-file="$DIR/munge/munged.pid" \
        --log-file="$DIR/munge/munged.log"
fi
wait_for 10 munged sh -c 'munge -n | unmunge'

# --- MariaDB: a private data directory on 127.0.0.1:$DB_PORT -------------------------------------
if [ ! -d "$DIR/mysql/data/mysql" ]; then
    mariadb-install-db --user=root --datadir="$DIR/mysql/data" --skip-test-db \
        --auth-root-authentication-method=socket > "$DIR/log/mariadb-install.log" 2>&1
fi
if ! running "$DIR/mysql/mariadbd.pid"; then
    mariadbd --user=root --datadir="$DIR/mysql/data" --socket="$DIR/mysql/mysql.sock" \
        --port="$DB_PORT" --bind-address=127.0.0.1 --pid-file="$DIR/mysql/mariadbd.pid" \
        --log-error="$DIR/log/mariadb.log" --skip-name-resolve --innodb-buffer-pool-size=64M \
        > /dev/null 2>&1 &
fi
wait_for 60 MariaDB mariadb-admin --socket="$DIR/mysql/mysql.sock" ping
mariadb --socket="$DIR/mysql/mysql.sock" <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
SQL

# --- configuration ------------------------------------------------------------------------------
CPUS=$(nproc)
MEMORY_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
cat > "$DIR/slurmdbd.conf" <<EOF
# Written by scripts/slurm/start.sh: accounting for the single-node test cluster.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASSWORD
StorageLoc=slurm_acct_db
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
EOF
chmod 600 "$DIR/slurmdbd.conf"
cat > "$DIR/slurm.conf" <<EOF
# Written by scripts/slurm/start.sh: one node, one partition, accounting through slurmdbd.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# No cgroups in a CI container: processes are tracked through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
# sacct shows each job's comment (the SLURM executor writes the rule and wildcards there).
AccountingStoreFlags=job_comment
ReturnToService=2
SlurmdTimeout=60
MinJobAge=300
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEMORY_MB State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

# Slurm's default path points to this configuration: snakemake-executor-plugin-slurm-jobstep
# drops SLURM_CONF (with every SLURM_* variable) before the srun it runs inside a job, so srun
# finds the configuration only there. An existing configuration that is not ours is left alone.
if [ -L /etc/slurm/slurm.conf ] || [ ! -e /etc/slurm/slurm.conf ]; then
    mkdir -p /etc/slurm
    ln -sfn "$DIR/slurm.conf" /etc/slurm/slurm.conf
elif [ "$(readlink -f /etc/slurm/slurm.conf)" != "$DIR/slurm.conf" ]; then
    die "/etc/slurm/slurm.conf belongs to another cluster; jobs could not run srun on this one"
fi

# --- slurmdbd, the cluster and its account, then the controller and the node ---------------------
if ! running "$DIR/run/slurmdbd.pid"; then slurmdbd; fi
wait_for 60 slurmdbd sacctmgr -n list cluster
if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" > /dev/null
fi
if ! sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT"; then
    sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description="fwbench tests" \
        organization=fwbench > /dev/null
fi
if ! sacctmgr -n -P list assoc user="$(id -un)" account="$ACCOUNT" format=account | grep -q .; then
    sacctmgr -i add user "$(id -un)" account="$ACCOUNT" defaultaccount="$ACCOUNT" > /dev/null
fi
if ! running "$DIR/run/slurmctld.pid"; then slurmctld -f "$SLURM_CONF"; fi
if ! running "$DIR/run/slurmd.pid"; then slurmd -f "$SLURM_CONF" -N "$NODE"; fi
idle() { sinfo -h -N -o %T | grep -Eq '^(idle|mixed|allocated)'; }
wait_for 60 "the node (sinfo)" idle

echo "export SLURM_CONF=$SLURM_CONF" > "$DIR/env.sh"
say "cluster '$CLUSTER' up: node $NODE ($CPUS CPUs, ${MEMORY_MB} MB), partition debug, account $ACCOUNT"
say "use it with: . $DIR/env.sh"
