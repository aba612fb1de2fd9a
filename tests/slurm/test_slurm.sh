#!/usr/bin/env bash
# Sharded runs on a real SLURM (make test-slurm; root, Debian): installs slurm-wlm and munge
# when missing, starts a one-node cluster on this machine (munged, slurmctld, slurmd, all
# with their files in a temporary directory and ports 16817/16818 on 127.0.0.1, stopped
# at the end whatever happens), then for a small synthetic grid and a tiny model NIAH grid:
#  - writes the array script with kvbench slurm-script and submits it with `bash FILE`
#    (4 shards, then the merge job that waits for them with afterok);
#  - NIAH: once shard 1 has committed a result and is still running, `scontrol requeue`
#    kills it and puts it back in the queue; the rerun resumes its file (the results it
#    had committed keep their rows, nothing is computed twice) and the merge job, which
#    waits for the requeued task, finds nothing missing;
#  - the merged file equals an unsharded run of the same command (tests/same_results.py:
#    every row by key and value, timings aside, the plan included).
# Prints the wall time of the 4-shard runs (submission to merged file) and of the
# unsharded ones. Contacts nothing but 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
KB=$ROOT/kvbench
MODEL=${KVBENCH_MODEL:-$HOME/.cache/kvbench/SmolLM2-135M-Instruct.Q4_1.gguf}
[ "$(id -u)" = 0 ] || { echo "test_slurm.sh: needs root (it installs and starts SLURM's daemons)" >&2; exit 2; }
[ -x "$KB" ] || { echo "test_slurm.sh: build ./kvbench first (make)" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "test_slurm.sh: $MODEL is absent (make model)" >&2; exit 2; }

t_install=$SECONDS
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null ||
   ! command -v munged >/dev/null; then
    echo "installing slurm-wlm and munge (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi
echo "set-up: $((SECONDS - t_install))s"

T=$(mktemp -d /tmp/kvbench-slurm.XXXXXX)
chmod 755 "$T"
export SLURM_CONF=$T/slurm.conf
stop_cluster() {
    set +e
    scancel --quiet -u root >/dev/null 2>&1
    for p in slurmd slurmctld munged; do
        [ -f "$T/$p.pid" ] && kill "$(cat "$T/$p.pid")" 2>/dev/null
    done
    sleep 1
    for p in slurmd slurmctld munged; do
        [ -f "$T/$p.pid" ] && kill -9 "$(cat "$T/$p.pid")" 2>/dev/null
    done
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap stop_cluster EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
q() { sqlite3 "$1" "$2"; }

# ---------------------------------------------------------------- a one-node cluster
mkdir -p "$T/state" "$T/spool" "$T/work/res"
head -c 1024 /dev/urandom >"$T/munge.key"
chmod 400 "$T/munge.key"
munged -f --socket="$T/munge.sock" --key-file="$T/munge.key" --log-file="$T/munged.log" \
    --pid-file="$T/munged.pid" --seed-file="$T/munge.seed"
host=$(hostname -s)
cpus=$(nproc)
cat >"$SLURM_CONF" <<EOF
ClusterName=kvbench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$T/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=3600
NodeName=kvnode NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=kvbench Nodes=kvnode Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N kvnode
for i in $(seq 60); do
    sinfo -h -N -o "%t" 2>/dev/null | grep -qx "idle" && break
    sleep 1
done
sinfo -h -N -o "%N %t %c" | grep -q "kvnode idle" || {
    tail -20 "$T/slurmctld.log" "$T/slurmd.log" >&2
    echo "FAIL: the one-node cluster did not come up" >&2
    exit 1
}
echo "cluster up: node kvnode, $cpus CPUs ($(sinfo -V))"

state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1; }
# Waits until every job id given is finished; prints the states of those not COMPLETED.
wait_done() {
    local deadline=$((SECONDS + ${WAIT_S:-900}))
    while [ $SECONDS -lt $deadline ]; do
        [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
        sleep 1
    done
    for j in "$@"; do
        local s
        s=$(state "$j")
        [ "$s" = COMPLETED ] || echo "job $j: ${s:-unknown}"
    done
}
# submits FILE with bash, sets ARRAY and MERGE from its output line
submit() {
    local out
    out=$(cd "$T/work" && bash "$1")
    echo "  $out"
    ARRAY=$(echo "$out" | sed -n 's/.*array job \([0-9]*\) .*/\1/p')
    MERGE=$(echo "$out" | sed -n 's/.*merge job \([0-9]*\) .*/\1/p')
    [ -n "$ARRAY" ] && [ -n "$MERGE" ] || { fail "submission: '$out'"; return 1; }
}

# ---------------------------------------------------------------- a synthetic grid
SYN=(run --workload synthetic-niah,synthetic-multivalue --methods all --budget 0.1,0.2 --ctx 512,1024,2048
     --depths 0.1,0.5,0.9 --threads 1 --quiet)
"$KB" slurm-script --shards 4 --cpus 1 --chdir "$T/work" --out "$T/syn.sh" -- "$KB" "${SYN[@]}" --db res/syn.db 2>/dev/null
t0=$SECONDS
submit "$T/syn.sh"
bad=$(wait_done "$ARRAY" "$MERGE")
syn_sharded=$((SECONDS - t0))
[ -z "$bad" ] || fail "synthetic jobs: $bad; $(tail -5 "$T"/work/res/syn.*.log)"
t0=$SECONDS
(cd "$T/work" && "$KB" "${SYN[@]}" --threads "$cpus" --db res/syn_full.db >/dev/null)
syn_full=$((SECONDS - t0))
grep -q "complete" "$T/work/res/syn.merge.log" || fail "synthetic merge: $(cat "$T/work/res/syn.merge.log")"
python3 tests/same_results.py "$T/work/res/syn.db" "$T/work/res/syn_full.db" --plan || fail "synthetic: merged != unsharded"
echo "synthetic: 4 shards ${syn_sharded}s (submission to merged file), unsharded ${syn_full}s"

# ---------------------------------------------------------------- a model NIAH grid, one task requeued mid-run
for i in $(seq 0 299); do printf 'The river %d passed the old mill on a quiet morning. ' "$i"; done >"$T/hay.txt"
NIAH=(run --model "$MODEL" --workload niah --ctx 384,512 --depths 0,25,50,75,100 --methods fullkv,snapkv
      --budget 0.2 --max-new 8 --haystack "$T/hay.txt" --threads 1 --quiet)
"$KB" slurm-script --shards 4 --cpus 1 --chdir "$T/work" --out "$T/niah.sh" -- "$KB" "${NIAH[@]}" --db res/niah.db 2>/dev/null
t0=$SECONDS
submit "$T/niah.sh"
# shard 1 (two or three cases): requeue it once it has committed a result and is running
S1=$T/work/res/niah.shard-1-of-4.db
requeued=0
for i in $(seq 600); do
    st=$(state "${ARRAY}_1")
    case "$st" in PENDING|CONFIGURING|RUNNING) ;; *) break ;; esac
    n=0
    [ -f "$S1" ] && n=$(q "$S1" "SELECT count(*) FROM results" 2>/dev/null || echo 0)
    if [ "${n:-0}" -ge 1 ] && [ "$st" = RUNNING ]; then
        q "$S1" "SELECT id, created, method, budget, score, output FROM results ORDER BY id" >"$T/before.txt"
        scontrol requeue "${ARRAY}_1" && requeued=1
        echo "  requeued task ${ARRAY}_1 after $(wc -l <"$T/before.txt") committed results"
        # SLURM holds a requeued job back for a while; let it start as soon as a CPU is free
        for k in $(seq 20); do
            [ "$(state "${ARRAY}_1")" = PENDING ] && scontrol update JobId="${ARRAY}_1" StartTime=now 2>/dev/null && break
            sleep 0.5
        done
        break
    fi
    sleep 0.5
done
[ $requeued = 1 ] || fail "shard 1 finished before it could be requeued mid-run"
bad=$(wait_done "$ARRAY" "$MERGE")
niah_sharded=$((SECONDS - t0))
[ -z "$bad" ] || fail "NIAH jobs: $bad; $(tail -5 "$T"/work/res/niah.*.log)"
t0=$SECONDS
(cd "$T/work" && "$KB" "${NIAH[@]}" --threads "$cpus" --db res/niah_full.db >/dev/null)
niah_full=$((SECONDS - t0))
if [ $requeued = 1 ]; then
    log=$T/work/res/niah.shard-1-of-4.log
    grep -q "restart 1" "$log" || fail "the requeued task did not start again: $(cat "$log")"
    grep -q "results written, [1-9][0-9]* already present" "$log" || fail "the requeued task did not resume its file: $(cat "$log")"
    q "$S1" "SELECT id, created, method, budget, score, output FROM results ORDER BY id" | head -n "$(wc -l <"$T/before.txt")" >"$T/after.txt"
    cmp -s "$T/before.txt" "$T/after.txt" || fail "results committed before the requeue changed: $(diff "$T/before.txt" "$T/after.txt" | head -4)"
    [ "$(q "$S1" "SELECT count(*) FROM results")" = "$(($(q "$S1" "SELECT count(*) FROM cases") * 2))" ] ||
        fail "shard 1 is incomplete after the requeue"
fi
grep -q "20 of 20 planned results present, complete" "$T/work/res/niah.merge.log" || fail "NIAH merge: $(cat "$T/work/res/niah.merge.log")"
python3 tests/same_results.py "$T/work/res/niah.db" "$T/work/res/niah_full.db" --plan || fail "NIAH: merged != unsharded"
echo "NIAH (SmolLM2, 10 cases x 2 methods): 4 shards ${niah_sharded}s (submission to merged file, one task requeued), unsharded ${niah_full}s"

[ $fails = 0 ] && echo "test_slurm.sh: all checks passed (total $((SECONDS - t_install))s)"
exit $((fails > 0))
