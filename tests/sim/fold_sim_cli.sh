#!/bin/sh
# fold_sim: a 2-rank exchange on a given platform against a hand computation, 64-rank
# replays against fold's model of the same schedules, and bad arguments.
# Usage: fold_sim_cli.sh FOLD_SIM PLATFORM_DIR
set -u
SIM=$1
DIR=$2
fail() { echo "FAIL: $*"; exit 1; }
export FOLD_MODEL=generic   # step_us 0.05, move_us 0.1, reduce_gbs 30, eager_bytes 8192

# simulated_us of a run, or fail.
simulated() {
    out=$("$SIM" "$@") || fail "fold_sim $* exited $?"
    echo "$out" | awk '$1 == "simulated_us" { print $2 }'
}
# near GOT WANT: within 0.001 us.
near() {
    awk -v g="$1" -v w="$2" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(g != "" && d < 0.001) }'
}

# (1) 2x1 recursive doubling over two_hosts.xml (1 GB/s each way, 10 us). Each rank
# posts its send (step_us), then its receive (step_us), and reduces what arrives
# (step_us + move_us + bytes / 30 GB/s, in cache).
# 64 KiB, rendezvous: the data moves once both are posted, at 2 step_us.
want=$(awk 'BEGIN { b = 65536; printf "%.4f", 2*0.05 + 10 + b/1e3 + 0.05 + 0.1 + b/30e3 }')
got=$(simulated -S 2x1 -b 64k -A recursive_doubling --platform "$DIR/two_hosts.xml")
near "$got" "$want" || fail "2x1 64 KiB: simulated $got us, by hand $want us"
# 4 KiB, eager: the data moves once the send is posted; the start of a reduction of
# less than 4 KiB pays its share of move_us.
want=$(awk 'BEGIN { b = 4096; printf "%.4f", 0.05 + 10 + b/1e3 + 0.05 + 0.1 + b/30e3 }')
got=$(simulated -S 2x1 -b 4k -A recursive_doubling --platform "$DIR/two_hosts.xml")
near "$got" "$want" || fail "2x1 4 KiB: simulated $got us, by hand $want us"

# (2) 64 ranks on the built-in cluster (the model's own latencies and bandwidths):
# where no two messages share a link at once and nothing moves within a node in
# bulk, SimGrid and the model describe the same thing and agree within 3%.
for case in "4x16 ring 8k" "4x16 ring 64k" "4x16 rabenseifner 1k" "4x16 rabenseifner 8k" \
            "4x16 dpml 1k" "8x8 ring 1k" "8x8 rabenseifner 8k" "8x8 dpml 1k" \
            "8x8 ring 64k"; do
    set -- $case
    row=$("$SIM" -S "$1" -A "$2" -b "$3" --csv | tail -1) || fail "$case exited $?"
    echo "$row" | awk -F, -v c="$case" '{ r = $7 / $26
                                          printf "%s: simulated %s, model %s\n", c, $7, $26
                                          exit !($7 > 0 && r > 0.97 && r < 1.03) }' ||
        fail "$case: simulated and model differ by more than 3%"
done
# The CSV row has fold_perf's columns, then the simulator's.
head=$("$SIM" -S 8x8 -b 64k --csv | head -1)
echo "$head" | grep -q "^collective,algorithm,requested,bytes,count,iterations,avg_us," ||
    fail "--csv header: $head"
echo "$head" | grep -q ",segment_bytes,nodes,leaders,between_nodes,model_us,select_us,platform$" ||
    fail "--csv header: $head"
# Fold's choice is replayed with its leaders, and the critical path adds up.
out=$("$SIM" -S 8x8 -b 1M) || fail "8x8 1 MiB exited $?"
echo "$out" | grep -q "^# algorithm dpml" || fail "8x8 1 MiB: not fold's node-aware choice"
echo "$out" | awk '$1 == "simulated_us" { s = $2 } /^# critical path/ { p = $6 }
                   END { d = s - p; if (d < 0) d = -d; exit !(s > 0 && d < 0.01) }' ||
    fail "8x8 1 MiB: the critical path does not add up to the simulated time"
"$SIM" -S 2x2 -c reduce -b 256k | grep -q "^root_us " || fail "reduce: no root_us"

# (3) Bad arguments: a clear message and exit 2.
bad() {
    msg=$("$SIM" "$@" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "fold_sim $* exited $rc, not 2"
    echo "$msg" | grep -qe "$EXPECT" ||
        fail "fold_sim $*: no '$EXPECT' in: $(echo "$msg" | head -1)"
}
EXPECT="bad shape" bad -S 0x4 -b 1k
EXPECT="bad shape" bad -S 2,x -b 1k
EXPECT="-S SHAPE is needed" bad -b 1k
EXPECT="-b BYTES is needed" bad -S 2x2
EXPECT="-b takes at least 4" bad -S 2x2 -b 2
EXPECT="-b takes at least 4" bad -S 2x2 -b 12q
EXPECT="-c takes allreduce or reduce" bad -S 2x2 -b 1k -c bcast
EXPECT="unknown option" bad -S 2x2 -b 1k --frobnicate
"$SIM" -S 2x2 -b 1k -A no_such_alg >/dev/null 2>&1; [ $? -eq 1 ] || fail "-A no_such_alg"
"$SIM" -S 2x2 -b 1k -A no_such_alg 2>&1 | grep -q "no such algorithm" || fail "-A message"
"$SIM" -S 4x1 -b 1k --platform "$DIR/two_hosts.xml" 2>&1 |
    grep -q "2 hosts, the shape 4 nodes" || fail "too few hosts"
"$SIM" -S 2x1 -b 1k --platform /nonexistent.xml 2>&1 | grep -q "could not load platform" ||
    fail "a missing platform"
echo "fold_sim_cli: ok"
