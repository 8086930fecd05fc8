#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for testing the sharded build's recipe
# (docs/cluster/) on a real scheduler: munged, slurmctld and slurmd on localhost, every
# file (configuration, keys, state, logs) in one folder.
#   scripts/slurm-local.sh start DIR   starts it; prints `export SLURM_CONF=DIR/slurm.conf`
#   scripts/slurm-local.sh stop DIR    stops it
# Needs Debian's slurm-wlm and munge (scripts/setup.sh installs them as root) and root
# (slurmd runs jobs as their users). Exits 77 with the reason when either is missing.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop DIR" >&2
    exit 2
fi

stop() {
    if [ -f "$dir/slurm.conf" ]; then
        SLURM_CONF="$dir/slurm.conf" scontrol shutdown >/dev/null 2>&1 || true
    fi
    for pidfile in "$dir/slurmctld.pid" "$dir/slurmd.pid" "$dir/munge/munged.pid"; do
        if [ -f "$pidfile" ]; then
            pid=$(cat "$pidfile")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$pidfile"
        fi
    done
}

case "$cmd" in
stop)
    stop
    exit 0
    ;;
start) ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac

for tool in slurmctld slurmd sbatch scontrol munged munge; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "no $tool (install slurm-wlm and munge: scripts/setup.sh does, as root)" >&2
        exit 77
    fi
done
if [ "$(id -u)" != 0 ]; then
    echo "not root: slurmd runs jobs as their submitting users and must run as root" >&2
    exit 77
fi

dir=$(realpath -m "$dir")
mkdir -p "$dir"/{state,spool,log,munge}
chmod 700 "$dir/munge"
chmod 755 "$dir"
# A fresh key for this cluster only.
head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed" \
    --log-file="$dir/log/munged.log"

host=$(hostname -s)
# Ports of our own (not the defaults 6817/6818), so a real Slurm on the machine is not
# disturbed; proctrack/linuxproc and task/none need no cgroups.
cat >"$dir/slurm.conf" <<EOF
ClusterName=melctl-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${MELCTL_SLURMCTLD_PORT:-16817}
SlurmdPort=${MELCTL_SLURMD_PORT:-16818}
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
# Look at pending jobs every second (the default is a minute): the merge starts soon
# after the last array task ends.
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo) State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -i
slurmd -N "$host"
# Ready when the node is idle (slurmd registered with slurmctld).
for _ in $(seq 100); do
    if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
        echo "export SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 0.2
done
echo "the local Slurm did not come up; its logs:" >&2
tail -n 20 "$dir"/log/*.log >&2 || true
stop
exit 1
