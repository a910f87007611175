#!/usr/bin/env bash
# slurm_run.sh: a real Slurm cluster on mnrun.sh's namespaced nodes. Builds mnrun's
# network (its functions, sourced), then starts Debian's munged and slurmctld in node0
# and one slurmd per node (each in its namespace, under its own host name), all with a
# configuration and state of this run only, and runs `srun ARGS...` in node0. Every
# process and file it made goes when the run ends, also on failure or a signal (mnrun's
# teardown: the namespaces' processes, the namespaces, the run's state directory, which
# holds Slurm's and munge's files); `mnrun.sh cleanup` removes what a killed run left.
#
# usage: slurm_run.sh [--nodes N] [--timeout SEC] [--verbose] -- SRUN_ARGS...
#        slurm_run.sh check
# Exit status: srun's, 77 when this machine cannot make namespaces or has no Slurm
# with its PMIx plugin (so that ctest reports a skip), 2 on a usage error.
set -euo pipefail

# shellcheck source=mnrun.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/mnrun.sh"

readonly SLURM_PLUGINS=/usr/lib/x86_64-linux-gnu/slurm-wlm
srun_argv=()
slurm_dir=""

slurm_usage() {
    sed -n '2,/^set -euo/p' "$(readlink -f "${BASH_SOURCE[0]}")" | sed '$d; s/^# \{0,1\}//'
}

# Slurm's daemons, munge and the PMIx plugin, besides what mnrun needs.
slurm_preflight() {
    local tool
    for tool in munged slurmctld slurmd srun sinfo; do
        command -v "$tool" >/dev/null 2>&1 ||
            skip "$tool is not installed (Debian: slurmctld slurmd munge slurm-client)"
    done
    [ -e "$SLURM_PLUGINS/mpi_pmix.so" ] ||
        skip "Slurm's PMIx plugin ($SLURM_PLUGINS/mpi_pmix.so) is not installed"
    preflight
}

# The cluster's configuration: node i is node<i> at mnrun's address for it, 2 CPUs each
# (what srun may place there); no cgroups, accounting or DNS.
write_slurm_conf() {
    local i
    {
        cat <<EOF
ClusterName=foldmn
SlurmctldHost=node0($SUBNET.1)
AuthType=auth/munge
AuthInfo=socket=$slurm_dir/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$slurm_dir/ctld
SlurmdSpoolDir=$slurm_dir/spool-%n
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd-%n.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/linear
MpiDefault=none
ReturnToService=2
EOF
        for ((i = 0; i < nodes; i++)); do
            echo "NodeName=node$i NodeAddr=$SUBNET.$((i + 1)) CPUs=2 State=UNKNOWN"
        done
        echo "PartitionName=fold Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    } >"$slurm_dir/slurm.conf"
    # slurmd 22.05 starts its cgroup plugin whatever tracks the processes, and its
    # autodetection fails on a cgroup v1 tree under a tmpfs (containers): name it.
    if [ -d /sys/fs/cgroup/freezer ]; then
        echo "CgroupPlugin=cgroup/v1" >"$slurm_dir/cgroup.conf"
    fi
}

# in_node I COMMAND...: runs COMMAND in node I's namespace under its host name.
in_node() {
    local i=$1
    shift
    ip netns exec "$(node_ns "$run_id" "$i")" unshare --uts "$BASH" "$SELF" _enter \
        "node$i" -- "$@"
}

# The directories of /tmp the nodes must still see: those holding the run's programs
# and this script (a checkout or build under /tmp, as CI may have), each /tmp/NAME.
tmp_keep() {
    local arg
    for arg in "$PWD" "$SELF" "${srun_argv[@]}"; do
        arg=${arg#*=}   # (NAME=PATH arguments of env(1))
        case $arg in
        /tmp/?*) arg=${arg#/tmp/}; echo "/tmp/${arg%%/*}" ;;
        esac
    done | sort -u
}

# in_node_tmp I COMMAND...: the same with a /tmp of its own, as a real node has: Slurm's
# PMIx plugin makes /tmp/spmix_appdir_<uid>_<step> on every node of a step. The
# directories tmp_keep names are bound back into it from the real /tmp (held at
# $slurm_dir/real-tmp-I meanwhile). The tmpfs goes with the mount namespace when the
# last process in it ends.
in_node_tmp() {
    local i=$1
    shift
    local held=$slurm_dir/real-tmp-$i
    mkdir -p "$held"
    ip netns exec "$(node_ns "$run_id" "$i")" unshare --uts --mount --propagation private \
        "$BASH" "$SELF" _enter "node$i" -- \
        "$BASH" -c 'held=$1 keep=$2; shift 2
            mount --bind /tmp "$held" && mount -t tmpfs -o size=256m fold-mn-tmp /tmp || exit 1
            for d in $keep; do
                mkdir -p "$d" && mount --bind "$held/${d#/tmp/}" "$d" || exit 1
            done
            exec "$@"' _ "$held" "$(tmp_keep | tr '\n' ' ')" "$@"
}

# start_daemon I LOG COMMAND...: starts a daemon in node I (with its own /tmp); if it
# fails, shows its log.
start_daemon() {
    local i=$1 logfile=$slurm_dir/$2
    shift 2
    in_node_tmp "$i" "$@" && return 0
    log "$1 failed to start in node$i; the end of $logfile:"
    tail -n 20 "$logfile" >&2 2>/dev/null || true
    return 1
}

# munged (one for the cluster: its socket is a file, reached from every namespace) and
# slurmctld in node0, then a slurmd per node; waits until every node is idle.
start_slurm() {
    local i
    mkdir -p "$slurm_dir/ctld"
    for ((i = 0; i < nodes; i++)); do
        mkdir -p "$slurm_dir/spool-node$i"
    done
    # A key of this run only; munged insists the key is private to its owner.
    (umask 077 && head -c 128 /dev/urandom >"$slurm_dir/munge.key")
    start_daemon 0 munged.log munged --force --origin="$SUBNET.1" \
        --key-file="$slurm_dir/munge.key" \
        --socket="$slurm_dir/munge.socket" --pid-file="$slurm_dir/munged.pid" \
        --log-file="$slurm_dir/munged.log" --seed-file="$slurm_dir/munged.seed"
    write_slurm_conf
    start_daemon 0 slurmctld.log slurmctld -f "$slurm_dir/slurm.conf" -i
    for ((i = 0; i < nodes; i++)); do
        start_daemon "$i" "slurmd-node$i.log" slurmd -f "$slurm_dir/slurm.conf" -N "node$i"
    done
    local idle=0 _
    for _ in $(seq 1 150); do
        idle=$(in_node 0 sinfo -h -N -t idle -o %N 2>/dev/null | wc -l) || idle=0
        [ "$idle" -ge "$nodes" ] && return 0
        sleep 0.2
    done
    log "Slurm did not bring up $nodes idle nodes in 30 s:"
    in_node 0 sinfo -N 2>&1 | sed 's/^/  /' >&2 || true
    tail -n 5 "$slurm_dir"/*.log >&2 || true
    return 1
}

slurm_main() {
    nodes=2
    while [ $# -gt 0 ]; do
        case $1 in
            -n | --nodes) nodes=${2:?}; shift 2 ;;
            -t | --timeout) timeout_s=${2:?}; shift 2 ;;
            -v | --verbose) verbose=1; shift ;;
            -h | --help) slurm_usage; exit 0 ;;
            --) shift; srun_argv=("$@"); break ;;
            *) die_usage "unknown option: $1" ;;
        esac
    done
    [ ${#srun_argv[@]} -gt 0 ] || die_usage "no srun arguments after --"
    [[ $nodes =~ ^[1-9][0-9]?$ ]] || die_usage "bad --nodes: $nodes"
    [[ $timeout_s =~ ^[0-9]+$ ]] || die_usage "bad --timeout: $timeout_s"
    slurm_preflight
    cleanup_runs
    trap on_exit EXIT
    trap 'on_signal INT' INT
    trap 'on_signal TERM' TERM
    trap 'on_signal HUP' HUP
    new_run
    slurm_dir=$STATE_ROOT/$run_id/slurm
    mkdir -p "$slurm_dir"
    export SLURM_CONF=$slurm_dir/slurm.conf
    log "run $run_id: Slurm on $nodes nodes, state in $slurm_dir"
    build_network
    start_slurm
    local -a argv=(srun "${srun_argv[@]}")
    local status=0
    if [ "$timeout_s" -gt 0 ]; then
        argv=(timeout -k 10 "$timeout_s" "${argv[@]}")
    fi
    if [ "$verbose" -eq 1 ]; then
        log "+ (node0) ${argv[*]}"
    fi
    # In the background, so that a signal reaches the trap at once.
    in_node 0 "${argv[@]}" &
    wait $! || status=$?
    if [ "$status" -ne 0 ] && [ "$verbose" -eq 1 ]; then
        tail -n 20 "$slurm_dir"/*.log >&2 || true
    fi
    return "$status"
}

case ${1:-} in
    check) slurm_preflight; log "namespaces and Slurm with its PMIx plugin work here" ;;
    -h | --help | "") slurm_usage ;;
    *) slurm_main "$@" ;;
esac
