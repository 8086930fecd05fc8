#!/usr/bin/env bash
# Sharded against single on one machine: a build of DATA, 2 shards built at once (one
# thread each) then merged, 4 shards one after another then merged; seconds of each, and
# each merge compared with the single build (scripts/compare_outputs.py).
#   benches/shard_bench.sh DATA WORK [MELCTL]
set -euo pipefail
data=$1 work=$2 m=${3:-target/debug/melctl}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
cat "$data"/*/*/* >/dev/null # warm the page cache
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
rm -rf "$work"/{single,sh2p,sh4s}
s=$(now)
"$m" build -i "$data" -o "$work/single" -q --loader stream
echo "single build $(since "$s")"
s=$(now)
"$m" build -i "$data" -o "$work/sh2p" -q --loader stream --threads 1 --shard 0/2 &
"$m" build -i "$data" -o "$work/sh2p" -q --loader stream --threads 1 --shard 1/2
wait
echo "2 shards at once $(since "$s")"
s=$(now)
"$m" merge "$work/sh2p" -q
echo "merge of 2 $(since "$s")"
s=$(now)
for k in 0 1 2 3; do "$m" build -i "$data" -o "$work/sh4s" -q --loader stream --shard "$k/4"; done
echo "4 shards in turn $(since "$s")"
s=$(now)
"$m" merge "$work/sh4s" -q
echo "merge of 4 $(since "$s")"
python3 "$here/scripts/compare_outputs.py" "$work/single" "$work/sh2p" | tail -1
python3 "$here/scripts/compare_outputs.py" "$work/single" "$work/sh4s" | tail -1
