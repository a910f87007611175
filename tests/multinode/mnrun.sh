#!/usr/bin/env bash
# mnrun.sh: several "nodes" on one machine. Creates N network namespaces (node0, node1, ...)
# joined by veth links to a bridge that lives in a namespace of its own, optionally caps
# every link with a tbf qdisc, and runs one command on every rank with mpirun started
# inside node0, reaching the other nodes through an rsh agent that enters their namespace.
# Everything it made (namespaces, links, state files) goes away when the run ends, also
# on failure or a signal; `mnrun.sh cleanup` removes what a killed run left behind.
# See tests/multinode/README.md. Exit status: the command's, 77 when this machine cannot
# make namespaces (so that ctest reports a skip), 2 on a usage error.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
readonly SELF
# Every namespace of run ID is called fmn-ID-<role>; the prefix lets cleanup find them.
readonly NS_PREFIX=fmn
# /run is a root-owned tmpfs: state there never outlives a reboot, like the namespaces.
readonly STATE_ROOT=/run/fold-mnrun
# The nodes' addresses. Each run's network is sealed in its own namespaces, so concurrent
# runs may use the same subnet without seeing each other.
readonly SUBNET=10.77.0
readonly SKIP=77
readonly MAX_NODES=200

# Set by parse_run_args.
nodes=""
ppn_list=()
rate=""
timeout_s=0
stats=0
verbose=0
mpirun_extra=()
command_argv=()
# Set once the run owns state; the EXIT trap tears down only then.
run_id=""

usage() {
    cat <<'EOF'
usage: mnrun.sh [options] -- COMMAND [ARGS...]
       mnrun.sh cleanup [RUN_ID...]
       mnrun.sh check

Runs COMMAND on every rank with mpirun across N namespaced nodes on this machine.

options:
  -n, --nodes N          number of nodes (2, or the length of a --ppn list)
  -p, --ppn N | N,N,...  ranks per node: one count for every node, or one per node (2)
  -r, --rate RATE        cap each node's link in both directions with
                         tbf (tc rate syntax: 1gbit, 200mbit); default: no cap
  -x NAME[=VALUE]        export a variable to every rank (mpirun -x)
      --mca NAME VALUE   an Open MPI MCA parameter (mpirun --mca)
  -m, --mpirun-arg ARG   one more word for mpirun's command line (repeatable)
  -t, --timeout SEC      stop the job after SEC seconds (exit status 124)
  -s, --stats            print each node link's byte counters after the run
  -v, --verbose          print the network commands and mpirun's command line
  -h, --help             this text

subcommands:
  cleanup [RUN_ID...]    remove what runs left behind: the given runs, or else every run
                         whose harness process is gone (runs in progress are kept)
  check                  exit 0 when namespaces, veth and a bridge can be made, else 77

Node i is host "node<i>" (its own UTS name) at 10.77.0.<i+1> on interface eth0.
EOF
}

log() {
    printf 'mnrun: %s\n' "$*" >&2
}

die_usage() {
    log "$*"
    log "usage: mnrun.sh [options] -- COMMAND [ARGS...]; see mnrun.sh --help"
    exit 2
}

skip() {
    log "skipped: $*"
    exit "$SKIP"
}

# Runs a network command, echoing it with --verbose.
net() {
    if [ "$verbose" -eq 1 ]; then
        log "+ $*"
    fi
    "$@"
}

ns_name() {
    printf '%s-%s-%s' "$NS_PREFIX" "$1" "$2"
}

node_ns() {
    ns_name "$1" "node$2"
}

switch_ns() {
    ns_name "$1" sw
}

# Every namespace name on the machine, one per line ("ip netns list" adds " (id: N)").
all_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}'
}

run_namespaces() {
    all_namespaces | grep -E "^${NS_PREFIX}-$1-" || true
}

# The start time of a process (field 22 of /proc/PID/stat): a pid together with its start
# time names one process even after the pid is reused.
proc_start_time() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    # shellcheck disable=SC2086 # split the fields on purpose
    set -- $stat
    printf '%s\n' "${20}"
}

# ---- preflight --------------------------------------------------------------------------

# Everything the harness needs, tried for real in a throw-away namespace; skips (77) with
# the reason when something is missing, so a test on a machine without them is skipped.
preflight() {
    local tool probe
    for tool in ip unshare hostname mpirun; do
        command -v "$tool" >/dev/null 2>&1 || skip "$tool is not installed"
    done
    if [ -n "$rate" ]; then
        command -v tc >/dev/null 2>&1 || skip "tc is not installed (needed by --rate)"
    fi
    [ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
    mkdir -p "$STATE_ROOT" 2>/dev/null || skip "cannot create $STATE_ROOT"
    probe=$(ns_name "probe$$" x)
    if ! ip netns add "$probe" 2>/dev/null; then
        skip "cannot create a network namespace (ip netns add)"
    fi
    local ok=1 why=""
    if ! ip -n "$probe" link add br0 type bridge 2>/dev/null; then
        ok=0 why="cannot create a bridge"
    elif ! ip -n "$probe" link add a0 type veth peer name b0 2>/dev/null; then
        ok=0 why="cannot create a veth pair"
    elif [ -n "$rate" ] &&
        ! tc -n "$probe" qdisc add dev a0 root tbf rate "$rate" burst 128kb latency 10ms \
            2>/dev/null; then
        ok=0 why="cannot add a tbf qdisc at rate $rate"
    elif ! ip netns exec "$probe" unshare --uts hostname mnrun-probe 2>/dev/null; then
        ok=0 why="cannot name a node in a UTS namespace of its own (unshare --uts)"
    fi
    ip netns del "$probe" 2>/dev/null || true
    [ "$ok" -eq 1 ] || skip "$why"
}

# ---- teardown ---------------------------------------------------------------------------

# Stops the processes left inside a namespace (ranks, orteds, mpirun): all were started
# by this run, and a namespace that still holds processes would outlive its name.
kill_namespace_processes() {
    local ns=$1 pids _
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [ -n "${pids// /}" ] || return 0
    # shellcheck disable=SC2086 # a list of pids
    kill -TERM $pids 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        [ -n "${pids// /}" ] || return 0
        sleep 0.2
    done
    # shellcheck disable=SC2086 # a list of pids
    kill -KILL $pids 2>/dev/null || true
}

# Removes run ID: its processes, namespaces (deleting a namespace deletes the veth ends and
# the bridge in it), and its state directory. Safe to call on a half-built run.
teardown_run() {
    local id=$1 ns
    for ns in $(run_namespaces "$id"); do
        kill_namespace_processes "$ns"
    done
    for ns in $(run_namespaces "$id"); do
        ip netns del "$ns" 2>/dev/null || log "could not delete namespace $ns"
    done
    rm -rf --one-file-system "${STATE_ROOT:?}/$id"   # (never into a bind a node held)
}

# True when run ID's harness process is still alive. A preflight probe is named after its
# harness's pid; a state directory younger than a minute without an owner file yet is a
# run being set up.
run_is_live() {
    local id=$1 dir=$STATE_ROOT/$1 pid start mtime
    if [[ $id =~ ^probe([0-9]+)$ ]]; then
        [ -d "/proc/${BASH_REMATCH[1]}" ]
        return
    fi
    if [ -d "$dir" ] && [ ! -e "$dir/owner" ]; then
        mtime=$(stat -c %Y "$dir" 2>/dev/null) || return 1
        [ $(($(date +%s) - mtime)) -lt 60 ]
        return
    fi
    [ -r "$dir/owner" ] || return 1
    read -r pid start <"$dir/owner" || return 1
    [ "$(proc_start_time "$pid" 2>/dev/null || true)" = "$start" ]
}

# The run ids that have a state directory or at least one namespace.
known_runs() {
    {
        if [ -d "$STATE_ROOT" ]; then
            find "$STATE_ROOT" -mindepth 1 -maxdepth 1 -type d -printf '%f\n'
        fi
        all_namespaces | sed -n "s/^${NS_PREFIX}-\([0-9a-z]*\)-.*/\1/p"
    } | sort -u
}

# Removes the given runs, or every run whose harness is gone. A run's state directory
# is made before its first namespace, so a namespace without one is a leftover too.
cleanup_runs() {
    local id
    if [ $# -gt 0 ]; then
        for id in "$@"; do
            [[ $id =~ ^[0-9a-z]+$ ]] || die_usage "not a run id: $id"
            teardown_run "$id"
            log "removed run $id"
        done
        return 0
    fi
    for id in $(known_runs); do
        if run_is_live "$id"; then
            continue
        fi
        teardown_run "$id"
        log "removed leftovers of run $id"
    done
}

on_exit() {
    local status=$?
    trap - EXIT INT TERM HUP
    if [ -n "$run_id" ]; then
        teardown_run "$run_id"
    fi
    exit "$status"
}

on_signal() {
    log "interrupted by SIG$1; removing run $run_id"
    # 128 + signal number, as a shell reports a command killed by that signal.
    case $1 in
        INT) exit 130 ;;
        HUP) exit 129 ;;
        *) exit 143 ;;
    esac
}

# ---- building the network ---------------------------------------------------------------

# A fresh run id: short, so that names stay readable, and never reused while
# the state directory of an earlier run with that id exists.
new_run() {
    local id
    while :; do
        id=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
        if mkdir "$STATE_ROOT/$id" 2>/dev/null; then
            break
        fi
    done
    run_id=$id
    echo "$$ $(proc_start_time $$)" >"$STATE_ROOT/$id/owner"
}

add_cap() {
    local ns=$1 dev=$2
    # burst 128kb holds one 64 KiB GSO packet of a veth; latency bounds the queue.
    net tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst 128kb latency 10ms
}

# The switch: a bridge in a namespace of its own, so that no node sees the others' ports.
# Node i: eth0 in its namespace, whose peer p<i> is a bridge port. A cap goes on both
# ends, so that a node's sending and receiving are each limited, as on a full-duplex NIC.
build_network() {
    local sw i ns
    sw=$(switch_ns "$run_id")
    net ip netns add "$sw"
    net ip -n "$sw" link set lo up
    net ip -n "$sw" link add br0 type bridge
    net ip -n "$sw" link set br0 up
    for ((i = 0; i < nodes; i++)); do
        ns=$(node_ns "$run_id" "$i")
        net ip netns add "$ns"
        net ip -n "$ns" link set lo up
        net ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns"
        net ip -n "$sw" link set "p$i" master br0
        net ip -n "$sw" link set "p$i" up
        net ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0
        net ip -n "$ns" link set eth0 up
        if [ -n "$rate" ]; then
            add_cap "$ns" eth0
            add_cap "$sw" "p$i"
        fi
    done
}

# mpirun calls the agent as "AGENT HOST COMMAND..." (as it would call ssh); the agent is a
# file because plm_rsh_agent takes a program, and it carries the run id to this script.
write_agent() {
    local agent=$STATE_ROOT/$run_id/agent
    printf '#!/bin/sh\nexec %q %q _agent %q "$@"\n' "$BASH" "$SELF" "$run_id" >"$agent"
    chmod 755 "$agent"
    printf '%s\n' "$agent"
}

# ---- inside the nodes -------------------------------------------------------------------

# _agent ID HOST COMMAND...: run COMMAND, a shell command line as ssh would receive it,
# in HOST's namespace with HOST as the host name.
agent_main() {
    local id=$1 host=$2 ns
    shift 2
    [[ $host =~ ^node([0-9]+)$ ]] || { log "agent: unknown host $host"; exit 255; }
    ns=$(node_ns "$id" "${BASH_REMATCH[1]}")
    exec ip netns exec "$ns" unshare --uts "$BASH" "$SELF" _enter "$host" --shell "$@"
}

# _enter HOST --shell WORDS... | _enter HOST -- ARGV...: already in a fresh UTS namespace;
# name this "host", then run the command. Open MPI's TCP wire-up between nodes fails when
# all of them report the same host name, hence a name per node.
enter_main() {
    local host=$1 mode=$2
    shift 2
    hostname "$host"
    if [ "$mode" = --shell ]; then
        exec sh -c "$*"
    fi
    exec "$@"
}

# ---- the run ----------------------------------------------------------------------------

parse_run_args() {
    local ppn="2"
    while [ $# -gt 0 ]; do
        case $1 in
            -n | --nodes) nodes=${2:?}; shift 2 ;;
            -p | --ppn) ppn=${2:?}; shift 2 ;;
            -r | --rate) rate=${2:?}; shift 2 ;;
            -x) mpirun_extra+=(-x "${2:?}"); shift 2 ;;
            --mca) mpirun_extra+=(--mca "${2:?}" "${3:?}"); shift 3 ;;
            -m | --mpirun-arg) mpirun_extra+=("${2?}"); shift 2 ;;
            -t | --timeout) timeout_s=${2:?}; shift 2 ;;
            -s | --stats) stats=1; shift ;;
            -v | --verbose) verbose=1; shift ;;
            -h | --help) usage; exit 0 ;;
            --) shift; command_argv=("$@"); break ;;
            *) die_usage "unknown option: $1" ;;
        esac
    done
    [ ${#command_argv[@]} -gt 0 ] || die_usage "no command after --"
    [[ $ppn =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die_usage "bad --ppn: $ppn"
    IFS=, read -r -a ppn_list <<<"$ppn"
    if [ ${#ppn_list[@]} -gt 1 ]; then
        [ -z "$nodes" ] || [ "$nodes" -eq ${#ppn_list[@]} ] ||
            die_usage "--nodes $nodes but --ppn lists ${#ppn_list[@]} nodes"
        nodes=${#ppn_list[@]}
    fi
    nodes=${nodes:-2}
    if ! [[ $nodes =~ ^[1-9][0-9]*$ ]] || [ "$nodes" -gt "$MAX_NODES" ]; then
        die_usage "bad --nodes: $nodes (1..$MAX_NODES)"
    fi
    [[ $timeout_s =~ ^[0-9]+$ ]] || die_usage "bad --timeout: $timeout_s"
    if [ -n "$rate" ] && ! [[ $rate =~ ^[0-9]+(\.[0-9]+)?[a-zA-Z]*$ ]]; then
        die_usage "bad --rate: $rate"
    fi
    local i
    for ((i = ${#ppn_list[@]}; i < nodes; i++)); do
        ppn_list[i]=${ppn_list[0]}
    done
}

# "node0:2,node1:1,..." and the total rank count.
host_list() {
    local i list=""
    for ((i = 0; i < nodes; i++)); do
        list+="${list:+,}node$i:${ppn_list[i]}"
    done
    printf '%s\n' "$list"
}

total_ranks() {
    local i total=0
    for ((i = 0; i < nodes; i++)); do
        total=$((total + ppn_list[i]))
    done
    printf '%s\n' "$total"
}

print_stats() {
    local i ns rx tx sent dropped
    for ((i = 0; i < nodes; i++)); do
        ns=$(node_ns "$run_id" "$i")
        rx=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)
        tx=$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)
        # "Sent B bytes P pkt (dropped D, ...": what went through the cap, and what it dropped.
        read -r sent dropped < <(tc -n "$ns" -s qdisc show dev eth0 2>/dev/null |
            awk '/Sent/ {sub(",", "", $7); print $2, $7; exit}') || true
        log "link node$i eth0 rx_bytes=$rx tx_bytes=$tx qdisc_sent_bytes=${sent:-0}" \
            "qdisc_dropped=${dropped:-0}"
    done
}

# Starts mpirun in node0 (in the background, so that a signal reaches the trap at once
# rather than after mpirun exits) and returns its exit status.
launch() {
    local agent=$1 status=0
    local -a argv=(mpirun --mca plm_rsh_agent "$agent"
        # orteds on other nodes would otherwise start further orteds themselves; one level
        # keeps every launch going through this agent from node0.
        --mca plm_rsh_no_tree_spawn 1
        --host "$(host_list)" -n "$(total_ranks)"
        # All "nodes" share this machine's cores: binding would pin ranks of different
        # nodes to the same core.
        --oversubscribe --bind-to none)
    if [ "$(id -u)" -eq 0 ]; then
        argv+=(--allow-run-as-root)
    fi
    argv+=("${mpirun_extra[@]}" "${command_argv[@]}")
    if [ "$timeout_s" -gt 0 ]; then
        argv=(timeout -k 10 "$timeout_s" "${argv[@]}")
    fi
    if [ "$verbose" -eq 1 ]; then
        log "+ (node0) ${argv[*]}"
    fi
    ip netns exec "$(node_ns "$run_id" 0)" unshare --uts "$BASH" "$SELF" _enter node0 -- \
        "${argv[@]}" &
    wait $! || status=$?
    if [ "$status" -eq 124 ] && [ "$timeout_s" -gt 0 ]; then
        log "timed out after $timeout_s s"
    fi
    return "$status"
}

run_main() {
    parse_run_args "$@"
    preflight
    cleanup_runs
    trap on_exit EXIT
    trap 'on_signal INT' INT
    trap 'on_signal TERM' TERM
    trap 'on_signal HUP' HUP
    new_run
    log "run $run_id: $nodes nodes ($(host_list))${rate:+, links capped at $rate}"
    build_network
    local agent status=0
    agent=$(write_agent)
    launch "$agent" || status=$?
    if [ "$stats" -eq 1 ]; then
        print_stats
    fi
    return "$status"
}

main() {
    case ${1:-} in
        cleanup) shift; cleanup_runs "$@" ;;
        check) shift; preflight; log "namespaces, veth pairs and bridges work here" ;;
        _agent) shift; agent_main "$@" ;;
        _enter) shift; enter_main "$@" ;;
        -h | --help | "") usage ;;
        *) run_main "$@" ;;
    esac
}

# Sourced (tests/multinode/slurm_run.sh), it only defines its functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
