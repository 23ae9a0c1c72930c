#!/usr/bin/env bash
# keyer batch on a real Slurm cluster of one node: starts munged, slurmctld and slurmd from
# Debian's munge and slurm-wlm (scripts/setup.sh installs them) with a generated slurm.conf
# in a temporary directory (localhost only, ports picked free, no cgroups: proctrack/linuxproc,
# task/none), submits scripts/slurm/keyer-array.sbatch as a 3-task array over sample clips on
# the CPU (sbatch --array=0-2 --wait) and checks that the outputs equal single-machine runs;
# then cancels a task mid-way (scancel) and checks that submitting the array again completes
# its share. Every daemon it started is stopped on exit. Skips (77) saying why when the
# programs are missing, when it is not root (slurmd starts jobs as their user), or when the
# cluster does not come up.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
skip() { echo "SKIP: $*"; exit 77; }

for p in munged slurmctld slurmd sbatch squeue scancel sinfo scontrol python3; do
    command -v $p >/dev/null || skip "$p is missing (scripts/setup.sh installs munge and slurm-wlm)"
done
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start jobs; run this test as root"

# ---- the cluster ----------------------------------------------------------------------------------
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
s=$tmp/slurm
mkdir -p "$s/state" "$s/spool" "$s/munge" "$s/log"
chmod 700 "$s/munge"

# a free TCP port on 127.0.0.1
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ctld_port=$(free_port)
slurmd_port=$(free_port)
[ "$ctld_port" != "$slurmd_port" ] || slurmd_port=$(free_port)

head -c 1024 /dev/urandom > "$s/munge/munge.key"
chmod 400 "$s/munge/munge.key"
munged --force --key-file="$s/munge/munge.key" --socket="$s/munge/munge.sock" \
    --pid-file="$s/munge/munged.pid" --log-file="$s/log/munged.log" \
    --seed-file="$s/munge/munge.seed" --foreground >"$s/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do [ -S "$s/munge/munge.sock" ] && break; sleep 0.1; done
[ -S "$s/munge/munge.sock" ] || skip "munged did not start: $(tail -3 "$s/log/munged.out" 2>/dev/null)"

host=$(hostname -s)
cpus=$(nproc)
cat > "$s/slurm.conf" <<EOF
ClusterName=keyertest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$s/munge/munge.sock
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool/%n
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd.pid
SlurmctldLogFile=$s/log/slurmctld.log
SlurmdLogFile=$s/log/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=300
NodeName=keyernode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=keyernode Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
export SLURM_CONF=$s/slurm.conf
unset SLURM_JOB_ID SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN \
    SLURM_ARRAY_TASK_MAX SLURM_ARRAY_TASK_STEP

slurmctld -D -i -f "$SLURM_CONF" >"$s/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N keyernode -f "$SLURM_CONF" >"$s/log/slurmd.out" 2>&1 &
pids+=($!)
why_down() {
    echo "--- slurmctld"; tail -5 "$s/log/slurmctld.log" "$s/log/slurmctld.out" 2>/dev/null
    echo "--- slurmd"; tail -5 "$s/log/slurmd.log" "$s/log/slurmd.out" 2>/dev/null
}
state=""
for _ in $(seq 1 150); do
    state=$(sinfo -h -n keyernode -o %t 2>/dev/null)
    [ "$state" = idle ] && break
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { why_down; skip "a Slurm daemon exited at start (logs above)"; }; done
    sleep 0.2
done
[ "$state" = idle ] || { why_down; skip "the one-node cluster did not come up (node state '$state'; logs above)"; }
echo "cluster up: slurmctld on 127.0.0.1:$ctld_port, slurmd on :$slurmd_port, $cpus CPUs"

# ---- the inputs and the single-machine runs --------------------------------------------------------
opts=(--mask --model selfie --device cpu --preset ultrafast --threads 1 -q)
mkdir -p "$tmp/clips" "$tmp/single" "$tmp/logs"
names=()
for i in 1 2 3 4 5 6; do
    "$bin" make-sample "$tmp/clips/c$i.mp4" --image "$data/grace_hopper.jpg" --size 160x96 \
        --frames $((4 + i)) --fps 10 --preset ultrafast 2>/dev/null || fail "make-sample c$i"
    names+=(c$i.mp4)
done
# a long clip for the task that is cancelled (entry 1: task 1 of 3): long enough (1,200 frames) that
# the task is still writing when scancel reaches it on a loaded machine (400 frames once finished
# first under CI's load)
"$bin" make-sample "$tmp/clips/long.mp4" --image "$data/messi5.jpg" --size 320x180 --frames 1200 \
    --fps 30 --preset ultrafast 2>/dev/null || fail "make-sample long"
for f in "${names[@]}" long.mp4; do
    "$bin" "$tmp/clips/$f" -o "$tmp/single/$f" "${opts[@]}" || fail "single run $f"
done
printf '%s\n' "# the sample clips" "$tmp/clips/c1.mp4" "$tmp/clips/c2.mp4" "$tmp/clips/c3.mp4" \
    "$tmp/clips/c4.mp4" "$tmp/clips/c5.mp4" "$tmp/clips/c6.mp4" > "$tmp/clips.txt"
printf '%s\n' "$tmp/clips/c1.mp4" "$tmp/clips/long.mp4" "$tmp/clips/c2.mp4" \
    "$tmp/clips/c3.mp4" > "$tmp/cancel.txt"

# the array template, less its GPU request (this cluster has no GPUs)
grep -v '^#SBATCH --gres' "$repo/scripts/slurm/keyer-array.sbatch" > "$tmp/array.sbatch"
grep -q '^#SBATCH --gres=gpu' "$repo/scripts/slurm/keyer-array.sbatch" ||
    fail "the template no longer asks for GPUs"
export KEYER=$bin

submit() { # submit OUTDIR MANIFEST [sbatch options]: prints the job id
    local out=$1 man=$2
    shift 2
    sbatch --parsable --array=0-2 --chdir="$tmp" --output="$tmp/logs/%A_%a.log" \
        --time=10 "$@" "$tmp/array.sbatch" "$man" "$out" "${opts[@]}"
}
show_logs() { for f in "$tmp"/logs/*.log; do echo "--- $f"; cat "$f"; done; why_down; }

# ---- a 3-task array: the outputs equal single-machine runs ---------------------------------------------
job=$(submit "$tmp/out" "$tmp/clips.txt" --wait) || { show_logs; fail "the array job failed"; }
job=${job%%;*}
for f in "${names[@]}"; do
    cmp -s "$tmp/out/$f" "$tmp/single/$f" || { show_logs; fail "out/$f differs from the single run"; }
done
for k in 0 1 2; do
    [ -f "$tmp/out/keyer-batch-$k-of-3.json" ] || { show_logs; fail "no summary of task $k"; }
done
echo "array $job: 6 outputs equal to the single runs"

# ---- a task cancelled mid-way is completed by submitting again -----------------------------------------
job=$(submit "$tmp/cancelled" "$tmp/cancel.txt") || fail "sbatch of the cancel test"
job=${job%%;*}
for _ in $(seq 1 600); do
    [ -s "$tmp/cancelled/.long.partial.mp4" ] && break
    sleep 0.1
done
[ -s "$tmp/cancelled/.long.partial.mp4" ] || { show_logs; fail "task 1 never started writing long.mp4"; }
scancel "${job}_1" || fail "scancel ${job}_1"
for _ in $(seq 1 300); do
    [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break
    sleep 0.1
done
[ -z "$(squeue -h -j "$job")" ] || { show_logs; fail "job $job did not end"; }
[ ! -e "$tmp/cancelled/long.mp4" ] || fail "the cancelled task left long.mp4 under its final name"
task1=$(scontrol show job "${job}_1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1)
[ "$task1" = CANCELLED ] || { show_logs; fail "task ${job}_1 ended $task1, not CANCELLED"; }
echo "task ${job}_1 cancelled while writing long.mp4"
job2=$(submit "$tmp/cancelled" "$tmp/cancel.txt" --wait) || { show_logs; fail "the second submission failed"; }
for f in c1.mp4 long.mp4 c2.mp4 c3.mp4; do
    cmp -s "$tmp/cancelled/$f" "$tmp/single/$f" || { show_logs; fail "cancelled/$f differs from the single run"; }
done
[ ! -e "$tmp/cancelled/.long.partial.mp4" ] || fail "the temporary file is left"
skipped=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["skipped"]))' \
    "$tmp/cancelled/keyer-batch-0-of-3.json")
[ "$skipped" = 2 ] || fail "task 0 of the second submission did not skip its 2 done outputs"
echo "array ${job2%%;*} completed the cancelled task's share"
echo "PASS"
