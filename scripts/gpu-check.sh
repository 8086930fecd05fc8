#!/usr/bin/env bash
# The GPU check, run ON the GPU machine from the repository root after
# `cargo xtask gpu-check` staged the binaries in .device-bin/ (see README):
#   bash scripts/gpu-check.sh [--quick|--wgpu] [CLIPS]
# 1. the conformance suites on the GPU: wgpu through the NVIDIA Vulkan driver
#    (MEL_REQUIRE_WGPU=1; the f32 shader, with its compensated-arithmetic check on this
#    driver) and CUDA with both kernels, the verified f64 one and the compensated f32
#    one (MEL_REQUIRE_GPU=1; the host-emulator tests are skipped: the GPU runs the real
#    thing): a skip is a failure;
# 2. the kernels alone on resident data: both CUDA kernels (device events; the launch
#    shape chosen for this device, its registers and resident warps printed) and wgpu
#    (timestamp queries), medians of many launches, then the backends from host memory
#    with the device's upload / kernel / download split;
# 3. torchaudio's MelSpectrogram on the same GPU, and a side-by-side table of step 2
#    and 3 (clips/s and ratios, f16 output);
# 4. the whole leak-4k build (51,434 clips by default, generated here), warm page cache,
#    melctl --backend cuda (the kernel suggested for the device) with each loader, wgpu, fsync off,
#    compressed chunks (checked equal to the uncompressed output, with h5py random-read
#    speed), cpu, then the torchaudio + h5py pipeline.
# `--quick` stops after step 3 (plus ncu profiles of both CUDA kernels when ncu exists);
# `--wgpu` runs the conformance suites, both kernels and cuda / wgpu / auto builds only
# (CLIPS default 20,000), for a short lease.
# `--builds` runs the conformance suites, then issue 26's whole-build questions only: the
# default CUDA build against the disk's floor (dd of its bytes with fsync), compressed
# builds with fewer reader / worker threads, the CPU build exact and `--precision fast`.
# Everything lands in $OUT/gpu-check.tgz (or ./gpu-check-out/).
set -uo pipefail
QUICK=0
WGPU_ONLY=0
BUILDS_ONLY=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
if [ "${1:-}" = "--wgpu" ]; then WGPU_ONLY=1; shift; fi
if [ "${1:-}" = "--builds" ]; then BUILDS_ONLY=1; shift; fi
if [ $WGPU_ONLY = 1 ]; then CLIPS=${1:-20000}; else CLIPS=${1:-51434}; fi
FINAL=${OUT:-gpu-check-out}
OUT=$(mktemp -d)
trap 'tar czf "$FINAL/gpu-check.tgz" -C "$OUT" . ; cp "$OUT/summary.txt" "$FINAL/"' EXIT
mkdir -p "$FINAL"
BIN=.device-bin
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
# What the steps read, checked first: a copy without them failed three tests midway.
for need in "$BIN/melctl" "$BIN/conformance_cuda" "$BIN/conformance_wgpu" fixtures/golden/manifest.json benches/peer_torchaudio.py; do
  if [ ! -e "$need" ]; then
    log "error: $need is missing: run from the root of a checkout, after 'cargo xtask gpu-check' staged .device-bin/ (carry .device-bin and fixtures/ to the GPU machine)"
    exit 1
  fi
done
log "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
log "cpus $(nproc), $(free -g | awk '/Mem/{print $2}') GB RAM"
chmod +x $BIN/* 2>/dev/null
# The Vulkan loader for wgpu (README: the .gl folder of Debian packages, carried).
if ! ldconfig -p | grep -q libvulkan && [ -d .gl ]; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
  if [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then export VK_DRIVER_FILES=$icd; fi
done
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
log "vulkan: loader $(ldconfig -p | grep -c libvulkan) entries, VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"
log "devices"; $BIN/melctl devices 2>&1 | tee -a "$OUT/summary.txt"

log "1a. wgpu conformance suite on the GPU (Vulkan): the f32 shader"
MEL_REQUIRE_WGPU=1 MEL_WGPU_DEVICE=${MEL_WGPU_DEVICE:-nvidia} timeout 300 $BIN/conformance_wgpu --nocapture --test-threads 1 2>&1 | tee "$OUT/conformance-wgpu.txt" | grep -E "^wgpu|worst|test |result|odd|differ|skipped|panicked|adapter: |cases" | sort -u | tee -a "$OUT/summary.txt"

log "1b. CUDA conformance suite on the GPU: the f64 and the f32 kernel"
MEL_REQUIRE_GPU=1 MEL_REQUIRE_NVRTC=1 timeout 400 $BIN/conformance_cuda --skip host_emulator --nocapture --test-threads 1 2>&1 | tee "$OUT/conformance.txt" | grep -E "worst|test |result|odd|differ|skipped|panicked|compiled|device times|kernel f(32|64) on" | sort -u | tee -a "$OUT/summary.txt"

if [ $BUILDS_ONLY = 1 ]; then
  log "4. builds of $CLIPS clips against the disk's floor"
  DATA=/tmp/leak/data
  [ -d $DATA ] || $BIN/melctl demo /tmp/leak --clips "$CLIPS" --no-build 2>&1 | tail -1
  warm() { find $DATA -name '*.wav' -print0 | xargs -0 -P 8 cat > /dev/null; sync; }
  threads() {  # threads PID FILE: every thread's id, name and CPU seconds, sampled until PID exits
    local pid=$1 file=$2
    : > "$file"
    [ -n "$pid" ] || return 0
    while kill -0 "$pid" 2>/dev/null; do
      cat /proc/$pid/task/*/stat 2>/dev/null \
        | awk '{ n = $2; gsub(/[()]/, "", n); print $1, n, ($14 + $15) / 100 }' >> "$file"
      sleep 0.2
    done
  }
  build() {  # build NAME FLAGS...: one build, its summary lines and the process's time
    local name=$1; shift
    warm; rm -rf /tmp/leak/out-$name
    log "melctl build $name: $*"
    /usr/bin/time -v $BIN/melctl build -i $DATA -o /tmp/leak/out-$name --batch 512 "$@" \
      --report "$OUT/build-$name.json" > "$OUT/build-$name.txt" 2> "$OUT/build-$name.err" &
    local timer=$!; sleep 0.2
    threads "$(pgrep -P $timer | head -1)" "$OUT/threads-$name.txt"
    wait $timer
    echo "exit $?" | tee -a "$OUT/summary.txt"
    # CPU seconds per thread (summed over a pool's threads, with its busiest one): a
    # single thread near the wall time is what the build waits on.
    awk '{ if ($3 > t[$1]) t[$1] = $3; n[$1] = $2 }
         END { for (id in t) { k = n[id]; sub(/-[0-9]+$/, "-*", k); s[k] += t[id]; if (t[id] > m[k]) m[k] = t[id] }
               for (k in s) printf "  cpu %-16s %7.2f s (busiest thread %.2f s)\n", k, s[k], m[k] }' \
      "$OUT/threads-$name.txt" | sort -k3 -nr | head -8 | tee -a "$OUT/summary.txt"
    grep -E "^backend|^total|clips/s|bottleneck|load |mel |write " "$OUT/build-$name.txt" | tee -a "$OUT/summary.txt"
    grep -E "Elapsed|Percent of CPU|Maximum resident" "$OUT/build-$name.err" | tee -a "$OUT/summary.txt"
    du -sb /tmp/leak/out-$name | tee -a "$OUT/summary.txt"
  }
  build cuda --backend cuda --loader stream
  bytes=$(du -sb /tmp/leak/out-cuda | cut -f1)
  rm -rf /tmp/leak/out-cuda; sync
  log "disk floor: $bytes bytes written with dd and fsync (3 files, as the 3 splits)"
  start=$(date +%s%N)
  for i in 1 2 3; do dd if=/dev/zero of=/tmp/leak/floor-$i bs=8M count=$((bytes / 3 / 8388608 + 1)) conv=fsync status=none; done
  sync; end=$(date +%s%N)
  echo "floor $(( (end - start) / 1000000 )) ms" | tee -a "$OUT/summary.txt"
  rm -f /tmp/leak/floor-*
  printf '[hdf5]\nchunk_clips = 16\ngzip = 1\n' > /tmp/leak/gzip-16.toml
  build gzip --backend cuda --loader stream --config /tmp/leak/gzip-16.toml
  build gzip-readers4 --backend cuda --loader stream --config /tmp/leak/gzip-16.toml --readers 4
  build gzip-readers4-threads8 --backend cuda --loader stream --config /tmp/leak/gzip-16.toml --readers 4 --threads 8
  printf '[output]\nfsync = false\n' > /tmp/leak/nofsync.toml
  build nofsync --backend cuda --loader stream --config /tmp/leak/nofsync.toml
  build cpu --backend cpu --loader stream
  build cpu-fast --backend cpu --loader stream --precision fast
  log "done"; exit 0
fi

log "2. kernels alone: both CUDA kernels (chosen shapes), then wgpu"
if [ $WGPU_ONLY = 1 ]; then
  timeout 120 $BIN/kernel_time 8192 50 default 2>&1 | tee "$OUT/kernel.jsonl" | tee -a "$OUT/summary.txt"
else
  timeout 300 $BIN/kernel_time 8192 50 2>&1 | tee "$OUT/kernel.jsonl" | tee -a "$OUT/summary.txt"
  if [ $QUICK = 0 ]; then
    log "2b. CUDA launch shapes around the chosen one (f16)"
    timeout 300 $BIN/kernel_time 8192 30 sweep 2>&1 | tee "$OUT/kernel-sweep.jsonl" | tee -a "$OUT/summary.txt"
  fi
fi
MEL_WGPU_DEVICE=${MEL_WGPU_DEVICE:-nvidia} timeout 120 $BIN/wgpu_time 8192 30 2>&1 | tee "$OUT/wgpu-kernel.jsonl" | tee -a "$OUT/summary.txt"
# The invocation cap sets how many frame pairs share a workgroup (leak-4k: 64 → 1,
# 128 → 2, 256 → 3, the default); f16 rows only.
for wg in 64 128; do
  MELCTL_WGPU_WORKGROUP=$wg MEL_WGPU_DEVICE=${MEL_WGPU_DEVICE:-nvidia} timeout 120 $BIN/wgpu_time 8192 30 2>&1 \
    | grep '"dtype":"f16"' | grep wgpu_kernel | tee -a "$OUT/wgpu-kernel.jsonl" | tee -a "$OUT/summary.txt"
done

log "3. torchaudio MelSpectrogram alone"
python3 benches/peer_torchaudio.py kernel --clips 2048 --reps 20 2>&1 | tail -1 | tee "$OUT/torchaudio-kernel.jsonl" | tee -a "$OUT/summary.txt"
log "3b. kernels alone side by side (leak-4k, f16 output, 8,192 clips resident; torchaudio 2,048)"
python3 - "$OUT" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import json, sys, os
out = sys.argv[1]
def rows(name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return []
    r = []
    for line in open(p):
        try:
            r.append(json.loads(line))
        except ValueError:
            pass
    return r
table = []
for r in rows("kernel.jsonl"):
    if r.get("what") == "kernel" and r.get("dtype") == "f16" and r.get("shape_chosen"):
        shape = f'{r["warps"]} warps x {r["segs"]} segs, {r["registers"]} regs, {r["resident_warps_per_sm"]} warps/SM'
        table.append((f'CUDA {r["kernel"]} kernel', r["clips_per_s"], shape))
for r in rows("wgpu-kernel.jsonl"):
    if r.get("what") == "wgpu_kernel" and r.get("dtype") == "f16":
        table.append((f'wgpu f32 shader, workgroup {r["workgroup"]}', r["clips_per_s"], f'{r["pairs_per_workgroup"]} pairs, tables in workgroup memory: {r.get("twiddles_in_workgroup")}'))
peer = [r for r in rows("torchaudio-kernel.jsonl") if r.get("what") == "torchaudio_kernel"]
ta = peer[0]["clips_per_s"] if peer else None
if ta:
    table.append(("torchaudio MelSpectrogram + AmplitudeToDB", ta, "f32 cuFFT"))
cuda = {name: v for name, v, _ in table if name.startswith("CUDA")}
refs = [ta, cuda.get("CUDA f64 kernel"), cuda.get("CUDA f32 kernel")]
print(f'{"kernel":<44} {"clips/s":>10} {"x torchaudio":>12} {"x CUDA f64":>10} {"x CUDA f32":>10}  shape')
for name, v, shape in table:
    ratios = " ".join(f"{v / r:>{w}.2f}" if r else f'{"-":>{w}}' for r, w in zip(refs, [12, 10, 10]))
    print(f"{name:<44} {v:>10.0f} {ratios}  {shape}")
PY
if [ $WGPU_ONLY = 1 ]; then
  log "4. builds of $CLIPS clips: cuda, wgpu, auto (stream loader, batch 512, warm cache)"
  DATA=/tmp/leak/data
  [ -d $DATA ] || $BIN/melctl demo /tmp/leak --clips "$CLIPS" --no-build 2>&1 | tail -1
  warm() { find $DATA -name '*.wav' -print0 | xargs -0 -P 8 cat > /dev/null; }
  for backend in cuda wgpu auto; do
    warm; rm -rf /tmp/leak/out-$backend
    log "melctl $backend"
    /usr/bin/time -v timeout 90 $BIN/melctl build -i $DATA -o /tmp/leak/out-$backend --backend $backend --loader stream --batch 512 \
      --report "$OUT/build-$backend.json" > "$OUT/build-$backend.txt" 2> "$OUT/build-$backend.err"
    echo "exit $?" | tee -a "$OUT/summary.txt"
    grep -E "^backend|clips/s|bottleneck|mel " "$OUT/build-$backend.txt" | tee -a "$OUT/summary.txt"
    grep -E "Maximum resident|Elapsed|warning" "$OUT/build-$backend.err" | tee -a "$OUT/summary.txt"
  done
  log "outputs agree: wgpu vs cuda (h5py, every value)"
  python3 - <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import h5py, numpy as np
for s in ["training", "validation", "testing"]:
    a = h5py.File(f"/tmp/leak/out-wgpu/{s}.h5")["mel"]
    b = h5py.File(f"/tmp/leak/out-cuda/{s}.h5")["mel"]
    x, y = a[:].astype(np.float32), b[:].astype(np.float32)
    print(s, len(a), "wgpu-cuda max |diff| dB", float(np.abs(x - y).max()), "values differing", int((x != y).sum()), "of", x.size)
PY
  log "done"; exit 0
fi

if [ $QUICK = 1 ]; then
  if command -v ncu > /dev/null; then
    for k in f64 f32; do
      log "2c. ncu profile of the $k kernel (chosen shape)"
      ncu -k regex:mel_kernel -c 1 --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats $BIN/kernel_time 4096 2 default --kernel $k > "$OUT/ncu-$k.txt" 2>&1
      grep -E "Throughput|Pipe|Occupancy|Registers|Shared Memory|Stall|Warp Cycles|Issued|Bank|Duration|Eligible|L1|DRAM|Active Warps" "$OUT/ncu-$k.txt" | head -60 | tee -a "$OUT/summary.txt"
    done
  fi
  log "quick: done"; exit 0
fi

log "4. whole build of $CLIPS clips"
DATA=/tmp/leak/data
[ -d $DATA ] || $BIN/melctl demo /tmp/leak --clips "$CLIPS" --no-build 2>&1 | tail -1
du -sh $DATA | tee -a "$OUT/summary.txt"
warm() { find $DATA -name '*.wav' -print0 | xargs -0 -P 8 cat > /dev/null; }
for run in stream:512 stream:2048 preload:512 memmap:512 memmap:512; do
  loader=${run%%:*}; batch=${run##*:}
  warm; rm -rf /tmp/leak/out-$loader
  log "melctl cuda loader=$loader batch=$batch"
  /usr/bin/time -v $BIN/melctl build -i $DATA -o /tmp/leak/out-$loader --backend cuda --loader $loader --batch $batch \
    --cache-dir /tmp/leak/cache --report "$OUT/build-$loader-$batch.json" > "$OUT/build-$loader-$batch.txt" 2> "$OUT/build-$loader-$batch.err"
  echo "exit $?" | tee -a "$OUT/summary.txt"
  grep -E "clips/s|bottleneck|loader|load |mel |write " "$OUT/build-$loader-$batch.txt" | tee -a "$OUT/summary.txt"
  grep -E "Maximum resident|Elapsed" "$OUT/build-$loader-$batch.err" | tee -a "$OUT/summary.txt"
done
warm; rm -rf /tmp/leak/out-wgpu
log "melctl wgpu loader=stream batch=512"
/usr/bin/time -v $BIN/melctl build -i $DATA -o /tmp/leak/out-wgpu --backend wgpu --loader stream --batch 512 \
  --report "$OUT/build-wgpu.json" > "$OUT/build-wgpu.txt" 2> "$OUT/build-wgpu.err"
grep -E "^backend|clips/s|bottleneck" "$OUT/build-wgpu.txt" | tee -a "$OUT/summary.txt"
grep -E "Maximum resident|Elapsed" "$OUT/build-wgpu.err" | tee -a "$OUT/summary.txt"
warm; rm -rf /tmp/leak/out-nofsync
printf '[output]\nfsync = false\n' > /tmp/leak/nofsync.toml
log "melctl cuda loader=stream, output.fsync = false"
$BIN/melctl build -i $DATA -o /tmp/leak/out-nofsync --backend cuda --loader stream --batch 512 --config /tmp/leak/nofsync.toml \
  --report "$OUT/build-nofsync.json" > "$OUT/build-nofsync.txt" 2>&1
grep -E "clips/s|bottleneck|commit" "$OUT/build-nofsync.txt" | tee -a "$OUT/summary.txt"
# Smaller output: shuffled + deflated chunks compressed on all cores (the disk flushes
# at ~1.3 GB/s, so 3.9 GB uncompressed cannot be on disk in under ~3 s).
for run in stream:16 memmap:16 memmap:1; do
  loader=${run%%:*}; chunk=${run##*:}
  printf '[hdf5]\nchunk_clips = %s\ngzip = 1\n' "$chunk" > /tmp/leak/gzip-$chunk.toml
  warm; rm -rf /tmp/leak/out-gzip-$loader-$chunk
  log "melctl cuda loader=$loader batch=512, hdf5 chunk_clips=$chunk gzip=1"
  /usr/bin/time -v $BIN/melctl build -i $DATA -o /tmp/leak/out-gzip-$loader-$chunk --backend cuda --loader $loader --batch 512 \
    --cache-dir /tmp/leak/cache --config /tmp/leak/gzip-$chunk.toml --report "$OUT/build-gzip-$loader-$chunk.json" \
    > "$OUT/build-gzip-$loader-$chunk.txt" 2> "$OUT/build-gzip-$loader-$chunk.err"
  echo "exit $?" | tee -a "$OUT/summary.txt"
  grep -E "clips/s|bottleneck|load |mel |write " "$OUT/build-gzip-$loader-$chunk.txt" | tee -a "$OUT/summary.txt"
  grep -E "Maximum resident|Elapsed" "$OUT/build-gzip-$loader-$chunk.err" | tee -a "$OUT/summary.txt"
  du -sh /tmp/leak/out-gzip-$loader-$chunk | tee -a "$OUT/summary.txt"
done
log "compressed output equals the uncompressed one; random single-clip reads (h5py)"
python3 - <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import h5py, numpy as np, time
for s in ["training", "validation", "testing"]:
    a = h5py.File(f"/tmp/leak/out-stream/{s}.h5")["mel"]
    for d in ["out-gzip-stream-16", "out-gzip-memmap-1"]:
        b = h5py.File(f"/tmp/leak/{d}/{s}.h5")["mel"]
        same = all(np.array_equal(a[i:i + 4096].view(np.uint16), b[i:i + 4096].view(np.uint16)) for i in range(0, len(a), 4096))
        print(s, d, "identical" if same else "DIFFERENT", b.compression, b.shuffle, b.chunks)
rng = np.random.default_rng(0)
for d in ["out-stream", "out-gzip-stream-16", "out-gzip-memmap-1"]:
    m = h5py.File(f"/tmp/leak/{d}/training.h5")["mel"]
    idx = rng.integers(0, len(m), 2000)
    t = time.perf_counter()
    for i in idx:
        m[int(i)]
    print(d, f"random single-clip reads: {2000 / (time.perf_counter() - t):.0f} clips/s")
PY
# Why the compressed build was slower (issue 26: 10.41 s against 6.47 s): deflate on
# 14 free cores should take ~1.7 s. Hypothesis: readers + CPU pool + writer pool are each
# sized to every core. Fewer readers and threads leave the writer pool the cores.
for flags in "--readers 4" "--readers 4 --threads 8"; do
  tag=$(echo "$flags" | tr -d ' -')
  warm; rm -rf /tmp/leak/out-gzip-$tag
  log "melctl cuda loader=stream batch=512, chunk_clips=16 gzip=1, $flags"
  /usr/bin/time -v $BIN/melctl build -i $DATA -o /tmp/leak/out-gzip-$tag --backend cuda --loader stream --batch 512 \
    --config /tmp/leak/gzip-16.toml $flags --report "$OUT/build-gzip-$tag.json" \
    > "$OUT/build-gzip-$tag.txt" 2> "$OUT/build-gzip-$tag.err"
  grep -E "clips/s|bottleneck|load |mel |write " "$OUT/build-gzip-$tag.txt" | tee -a "$OUT/summary.txt"
  grep -E "Elapsed|Percent of CPU" "$OUT/build-gzip-$tag.err" | tee -a "$OUT/summary.txt"
done
warm; rm -rf /tmp/leak/out-cpu
log "melctl cpu (16 cores) loader=stream"
$BIN/melctl build -i $DATA -o /tmp/leak/out-cpu --backend cpu --loader stream --report "$OUT/build-cpu.json" > "$OUT/build-cpu.txt" 2>&1
grep -E "^total|bottleneck" "$OUT/build-cpu.txt" | tee -a "$OUT/summary.txt"
warm; rm -rf /tmp/leak/out-cpu-fast
log "melctl cpu (16 cores) loader=stream, --precision fast"
$BIN/melctl build -i $DATA -o /tmp/leak/out-cpu-fast --backend cpu --loader stream --precision fast --report "$OUT/build-cpu-fast.json" > "$OUT/build-cpu-fast.txt" 2>&1
grep -E "^backend|^total|bottleneck" "$OUT/build-cpu-fast.txt" | tee -a "$OUT/summary.txt"
warm; rm -rf /tmp/leak/out-peer
log "torchaudio + h5py pipeline"
python3 benches/peer_torchaudio.py pipeline --root $DATA --out /tmp/leak/out-peer 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
log "outputs agree: cuda vs cpu (h5py, max |diff| in dB)"
python3 - <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import h5py, numpy as np
for s in ["training", "validation", "testing"]:
    a = h5py.File(f"/tmp/leak/out-stream/{s}.h5")["mel"]
    b = h5py.File(f"/tmp/leak/out-cpu/{s}.h5")["mel"]
    c = h5py.File(f"/tmp/leak/out-peer/{s}.h5")["mel"]
    n = min(len(a), 2000)
    x, y, z = a[:n].astype(np.float32), b[:n].astype(np.float32), c[:n].astype(np.float32)
    print(s, len(a), "cuda-cpu", float(np.abs(x - y).max()), "cuda-torchaudio", float(np.abs(x - z).max()))
PY
log "done"
