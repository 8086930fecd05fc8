#!/usr/bin/env bash
# Submits a sharded melctl build to Slurm: an array of N tasks (build.sbatch), then the
# merge (merge.sbatch), which starts only when every task has succeeded.
#   docs/cluster/submit.sh [--cpus C] [--mem M] ROOT OUT N [extra sbatch options...]
# --cpus (default 2) and --mem (default 4G) size each build task and the merge; small
# defaults, so the jobs fit a small node: raise them for speed (melctl uses every CPU it
# is given). MELCTL (the binary, default: melctl on PATH) and MELCTL_ARGS (more build
# flags, e.g. "--preset speech-16k --dtype f32") reach the tasks through the environment.
# Prints the two job ids: ARRAY_JOB_ID MERGE_JOB_ID. Exits non-zero, saying why, when
# melctl is not found or Slurm will never run the jobs as asked (PartitionConfig).
set -euo pipefail
usage="usage: $0 [--cpus C] [--mem M] ROOT OUT N [sbatch options...]"
cpus=2 mem=4G
while [ $# -gt 0 ]; do
    case $1 in
        --cpus) cpus=${2:?$usage}; shift 2 ;;
        --cpus=*) cpus=${1#--cpus=}; shift ;;
        --mem) mem=${2:?$usage}; shift 2 ;;
        --mem=*) mem=${1#--mem=}; shift ;;
        *) break ;;
    esac
done
if [ $# -lt 3 ]; then
    echo "$usage" >&2
    exit 2
fi
case $cpus in ''|*[!0-9]*|0) echo "$0: --cpus $cpus: give a whole number from 1" >&2; exit 2 ;; esac
case $3 in ''|*[!0-9]*|0) echo "$0: N=$3: give the shard count, a whole number from 1" >&2; exit 2 ;; esac
# The tasks run melctl by the path found here (the nodes share this file system): found
# now, or nothing is submitted; a task would otherwise fail with "melctl: not found" and
# the merge would never run.
if ! melctl=$(command -v "${MELCTL:-melctl}"); then
    echo "$0: ${MELCTL:-melctl} not found: put melctl on PATH (cargo install --path crates/melctl), or set MELCTL=/path/to/melctl" >&2
    exit 1
fi
melctl=$(realpath "$melctl")
if ! "$melctl" --version >/dev/null 2>&1; then
    echo "$0: $melctl does not run here (melctl --version failed)" >&2
    exit 1
fi
root=$(realpath "$1") out=$(realpath -m "$2") n=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/logs"
# MELCTL_SHARDS: N for every task, so a task resubmitted alone (sbatch --array=5 ...)
# still builds shard 5 of N (its own array has one task).
export ROOT="$root" OUT="$out" MELCTL_SHARDS="$n" MELCTL="$melctl"
size=(--cpus-per-task="$cpus" --mem="$mem")
build=$(sbatch --parsable --array="0-$((n - 1))" --export=ALL "${size[@]}" \
    --output="$out/logs/shard-%a.log" "$@" "$here/build.sbatch")
build=${build%%;*}
merge=$(sbatch --parsable --dependency="afterok:$build" --kill-on-invalid-dep=yes \
    --export=ALL "${size[@]}" --output="$out/logs/merge.log" "$@" "$here/merge.sbatch")
merge=${merge%%;*}
# A job the partition's limits can never run stays pending for ever (reason
# PartitionConfig) while sbatch exits 0: cancel both and say so.
sleep 1
reason=$(squeue -h -j "$build" -o %r 2>/dev/null | sort -u | tr '\n' ' ')
case $reason in
    *PartitionConfig*|*PartitionNodeLimit*|*PartitionTimeLimit*)
        scancel "$build" "$merge" 2>/dev/null || true
        echo "$0: Slurm will not run the tasks as asked ($reason): lower --cpus ($cpus) or --mem ($mem), or pick a partition (-p); nothing was left queued" >&2
        exit 1 ;;
esac
echo "$build $merge"
