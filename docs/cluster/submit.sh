#!/usr/bin/env bash
# Submits a sharded melctl build to Slurm: an array of N tasks (build.sbatch), then the
# merge (merge.sbatch), which starts only when every task has succeeded.
#   docs/cluster/submit.sh ROOT OUT N [extra sbatch options...]
# MELCTL (the binary, default: melctl on PATH) and MELCTL_ARGS (more build flags, e.g.
# "--preset speech-16k --dtype f32") reach the tasks through the environment.
# Prints the two job ids: ARRAY_JOB_ID MERGE_JOB_ID.
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 ROOT OUT N [sbatch options...]" >&2
    exit 2
fi
root=$(realpath "$1") out=$(realpath -m "$2") n=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/logs"
# MELCTL_SHARDS: N for every task, so a task resubmitted alone (sbatch --array=5 ...)
# still builds shard 5 of N (its own array has one task).
export ROOT="$root" OUT="$out" MELCTL_SHARDS="$n"
build=$(sbatch --parsable --array="0-$((n - 1))" --export=ALL \
    --output="$out/logs/shard-%a.log" "$@" "$here/build.sbatch")
build=${build%%;*}
merge=$(sbatch --parsable --dependency="afterok:$build" --kill-on-invalid-dep=yes \
    --export=ALL --output="$out/logs/merge.log" "$@" "$here/merge.sbatch")
echo "$build ${merge%%;*}"
