#!/usr/bin/env bash
# Install the Debian packages a single-node test cluster needs (scripts/slurm/start.sh):
# munge (authentication), slurmctld + slurmd (scheduler and node daemon), slurmdbd + MariaDB
# (accounting, which sacct and the Snakemake SLURM executor read job states from), and the
# client commands. Debian 12 (bookworm) ships Slurm 22.05. Needs root; idempotent.
set -euo pipefail

PACKAGES=(munge slurmctld slurmd slurmdbd slurm-client mariadb-server)

missing=()
for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "scripts/slurm/install.sh: all installed (${PACKAGES[*]})"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/slurm/install.sh: installing ${missing[*]} needs root (sudo $0)" >&2
    exit 1
fi
apt-get update -q
# The packages' own services are not started here (no init system in CI containers);
# start.sh runs private daemons instead.
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
