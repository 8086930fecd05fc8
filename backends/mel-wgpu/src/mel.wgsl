// melctl's fused mel shader: clip samples -> distinct segments -> frames (centre
// padding, window) -> FFT -> power -> mel (non-zero filter spans) -> log -> output
// dtype, written in the final [clip][long][short][mel][frame] layout. The same
// pipeline as the CUDA kernel (backends/mel-cuda/src/mel.cu).
//
// One workgroup (256 invocations by default) computes one distinct segment. Frames go two at a time through one
// complex FFT (frame a in the real part, frame b in the imaginary part): an in-place
// radix-4 Stockham FFT (a radix-2 stage last when log2(N_FFT) is odd) in workgroup
// memory, in f64 (SHADER_F64): a float FFT misses torchaudio's float64 reference by up
// to 0.03 dB on bins ~100 dB below the peak (ARCHITECTURE.md). Power is rounded to f32
// once computed; mel sums, log and output conversion run in f32. A non-power-of-two
// N_FFT uses a direct real DFT per frame, in two passes (`mel_dft`, `mel_finish`).
//
// The host prepends the plan's constants (source.rs `shader`): N_FFT, N_FREQS,
// HOP, N_FRAMES, PAIRS, SEG_LEN, PAD, REFLECT, POWER, N_MELS, CLIP_SAMPLES,
// N_DISTINCT, SEGS_PER_CLIP, VPS, LOG_KIND, LOG_MUL, AMIN, HAS_TOP_DB, TOP_DB,
// LN_OFFSET, OUT_KIND (0: f32 bits; 1: f16 pairs; 2: bf16 pairs), WG, BFLY4, BFLY2,
// PER_K, MEL_IN_WG, MEL_WG_LEN, DFT_FRAMES, DFT_BLOCKS, and the section starts of `ints`: I_OFFSETS, I_MAP_START, I_MAP_OUT,
// I_F_FIRST, I_F_LEN, I_F_OFF. It also generates `fn fft(lid)` (the stage sequence).

struct Params {
    n_clips: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> clips: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> window: array<f64>;
@group(0) @binding(3) var<storage, read> twiddle: array<f64>;
@group(0) @binding(4) var<storage, read> ints: array<u32>;
@group(0) @binding(5) var<storage, read> fw: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;
// A segment's mel values when they do not fit in workgroup memory (MEL_IN_WG false):
// VPS values per distinct segment of the chunk.
@group(0) @binding(7) var<storage, read_write> scratch: array<f32>;

var<workgroup> buf: array<vec2<f64>, N_FFT>;
var<workgroup> pw: array<f32, PW_LEN>;
var<workgroup> mel: array<f32, MEL_WG_LEN>;
var<workgroup> red: array<f32, WG>;

// Mel value i of this workgroup's segment `seg`, in workgroup memory or in `scratch`.
fn mel_load(seg: u32, i: u32) -> f32 {
    if (MEL_IN_WG) {
        return mel[i];
    }
    return scratch[seg * VPS + i];
}

fn mel_store(seg: u32, i: u32, v: f32) {
    if (MEL_IN_WG) {
        mel[i] = v;
    } else {
        scratch[seg * VPS + i] = v;
    }
}

// Makes every invocation's mel writes visible to the whole workgroup.
fn sync_mel() {
    if (!MEL_IN_WG) {
        storageBarrier();
    }
    workgroupBarrier();
}

// exp(-2 pi i k / N_FFT)
fn tw(k: u32) -> vec2<f64> {
    return vec2<f64>(twiddle[2u * k], twiddle[2u * k + 1u]);
}

fn cmul(a: vec2<f64>, b: vec2<f64>) -> vec2<f64> {
    return vec2<f64>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// multiply by -i
fn mul_negi(a: vec2<f64>) -> vec2<f64> {
    return vec2<f64>(a.y, -a.x);
}

// One in-place radix-4 Stockham stage with `ns` values already combined: every
// invocation gathers its butterflies' inputs, the workgroup syncs, then writes.
fn stage4(ns: u32, lid: u32) {
    var v: array<array<vec2<f64>, 4>, BFLY4>;
    let stride = N_FFT / (4u * ns);
    for (var b = 0u; b < BFLY4; b++) {
        let j = lid + b * WG;
        if (j < N_FFT / 4u) {
            let k = j & (ns - 1u);
            let x0 = buf[j];
            let x1 = cmul(buf[j + N_FFT / 4u], tw(k * stride));
            let x2 = cmul(buf[j + N_FFT / 2u], tw(2u * k * stride));
            let x3 = cmul(buf[j + 3u * (N_FFT / 4u)], tw(3u * k * stride));
            let a0 = x0 + x2;
            let a1 = x0 - x2;
            let a2 = x1 + x3;
            let a3 = mul_negi(x1 - x3);
            v[b][0] = a0 + a2;
            v[b][1] = a1 + a3;
            v[b][2] = a0 - a2;
            v[b][3] = a1 - a3;
        }
    }
    workgroupBarrier();
    for (var b = 0u; b < BFLY4; b++) {
        let j = lid + b * WG;
        if (j < N_FFT / 4u) {
            let k = j & (ns - 1u);
            let idx = (j - k) * 4u + k;
            buf[idx] = v[b][0];
            buf[idx + ns] = v[b][1];
            buf[idx + 2u * ns] = v[b][2];
            buf[idx + 3u * ns] = v[b][3];
        }
    }
    workgroupBarrier();
}

// The last stage when log2(N_FFT) is odd: radix 2.
fn stage2(ns: u32, lid: u32) {
    var v: array<array<vec2<f64>, 2>, BFLY2>;
    let stride = N_FFT / (2u * ns);
    for (var b = 0u; b < BFLY2; b++) {
        let j = lid + b * WG;
        if (j < N_FFT / 2u) {
            let k = j & (ns - 1u);
            let x0 = buf[j];
            let x1 = cmul(buf[j + N_FFT / 2u], tw(k * stride));
            v[b][0] = x0 + x1;
            v[b][1] = x0 - x1;
        }
    }
    workgroupBarrier();
    for (var b = 0u; b < BFLY2; b++) {
        let j = lid + b * WG;
        if (j < N_FFT / 2u) {
            let k = j & (ns - 1u);
            let idx = (j - k) * 2u + k;
            buf[idx] = v[b][0];
            buf[idx + ns] = v[b][1];
        }
    }
    workgroupBarrier();
}

// The sample at padded position p of the segment whose first sample is clips[base]
// (torch.stft centre padding: reflect or zeros).
fn padded(base: u32, p: u32) -> f64 {
    var s = i32(p) - i32(PAD);
    if (REFLECT) {
        s = abs(s);
        if (s >= i32(SEG_LEN)) {
            s = 2 * (i32(SEG_LEN) - 1) - s;
        }
    } else if (s < 0 || s >= i32(SEG_LEN)) {
        return f64(0.0);
    }
    return f64(clips[base + u32(s)]);
}

fn post_power(p: f64) -> f32 {
    if (POWER == 1u) {
        return f32(sqrt(p));
    }
    return f32(p);
}

// Mel sums of the power spectrum at pw[first..first + N_FREQS] into mel[.., frame].
fn mel_frame(seg: u32, lid: u32, first: u32, frame: u32) {
    for (var m = lid; m < N_MELS; m += WG) {
        let k0 = ints[I_F_FIRST + m];
        let len = ints[I_F_LEN + m];
        let off = ints[I_F_OFF + m];
        var acc = 0.0f;
        for (var i = 0u; i < len; i++) {
            acc = fma(fw[off + i], pw[first + k0 + i], acc);
        }
        mel_store(seg, m * N_FRAMES + frame, acc);
    }
}

fn log_scale(v: f32) -> f32 {
    if (LOG_KIND == 1u) {
        // 10·log10 (or 20·log10 for magnitudes) through log2: WGSL has no log10.
        return LOG_MUL * 0.30102999566398119521 * log2(max(v, AMIN));
    }
    if (LOG_KIND == 2u) {
        return log(v + LN_OFFSET);
    }
    return v;
}

// top_db: nothing below the segment's peak minus TOP_DB (dB scale only).
fn floored(y: f32, floor_db: f32) -> f32 {
    if (LOG_KIND == 1u && HAS_TOP_DB) {
        return max(y, floor_db);
    }
    return y;
}

// f32 -> f16 bits, round to nearest even (subnormals, infinities, NaN kept).
fn to_f16(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    let sign = (x >> 16u) & 0x8000u;
    let ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
        return sign | 0x7e00u | ((ax >> 13u) & 0x3ffu);
    }
    if (ax >= 0x477ff000u) {
        return sign | 0x7c00u; // rounds to infinity
    }
    if (ax >= 0x38800000u) {
        let r = ax - 0x38000000u; // exponent rebiased from 127 to 15
        return sign | ((r + 0x0fffu + ((r >> 13u) & 1u)) >> 13u);
    }
    if (ax <= 0x33000000u) {
        return sign; // at most 2^-25: rounds to zero
    }
    let e = ax >> 23u;
    let m = (ax & 0x7fffffu) | 0x800000u;
    let shift = 126u - e; // value in units of 2^-24 is m >> shift
    let q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    var r = q;
    if (rem > half || (rem == half && (q & 1u) == 1u)) {
        r = q + 1u;
    }
    return sign | r;
}

// f32 -> bf16 bits, round to nearest even (NaN kept quiet).
fn to_bf16(v: f32) -> u32 {
    let u = bitcast<u32>(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return ((u >> 16u) | 0x40u) & 0xffffu;
    }
    return ((u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u) & 0xffffu;
}

fn to_half(v: f32) -> u32 {
    if (OUT_KIND == 1u) {
        return to_f16(v);
    }
    return to_bf16(v);
}

// The workgroup's index in a grid of at most 65535 columns.
fn group_index(wid: vec3<u32>) -> u32 {
    return wid.x + wid.y * 65535u;
}

// One pass for a power-of-two N_FFT: every frame of segment `seg`, then `finish`.
@compute @workgroup_size(WG)
fn mel_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let seg = group_index(wid);
    if (seg >= params.n_clips * N_DISTINCT) {
        return;
    }
    let base = (seg / N_DISTINCT) * CLIP_SAMPLES + ints[I_OFFSETS + seg % N_DISTINCT];
    for (var pair = 0u; pair < PAIRS; pair++) {
        let fa = 2u * pair;
        let fb = fa + 1u;
        let has_b = fb < N_FRAMES;
        for (var n = lid; n < N_FFT; n += WG) {
            let w = window[n];
            let a = w * padded(base, fa * HOP + n);
            var b = f64(0.0);
            if (has_b) {
                b = w * padded(base, fb * HOP + n);
            }
            buf[n] = vec2<f64>(a, b);
        }
        workgroupBarrier();
        fft(lid);
        // Separate the two spectra: A = (Z + conj(Y)) / 2, B = (Z - conj(Y)) / 2i.
        for (var q = 0u; q < PER_K; q++) {
            let k = lid + q * WG;
            if (k < N_FREQS) {
                let z = buf[k];
                let y = buf[(N_FFT - k) & (N_FFT - 1u)];
                let ar = z.x + y.x;
                let ai = z.y - y.y;
                let br = z.y + y.y;
                let bi = z.x - y.x;
                pw[k] = post_power(f64(0.25) * (ar * ar + ai * ai));
                pw[N_FREQS + k] = post_power(f64(0.25) * (br * br + bi * bi));
            }
        }
        workgroupBarrier();
        mel_frame(seg, lid, 0u, fa);
        if (has_b) {
            mel_frame(seg, lid, N_FREQS, fb);
        }
        sync_mel();
    }
    finish(seg, lid);
}

// Any N_FFT, pass 1: a direct real DFT of DFT_FRAMES frames of one segment per
// workgroup (spreading a long segment over many workgroups), mel sums into `scratch`.
@compute @workgroup_size(WG)
fn mel_dft(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = group_index(wid);
    let seg = g / DFT_BLOCKS;
    if (seg >= params.n_clips * N_DISTINCT) {
        return;
    }
    let base = (seg / N_DISTINCT) * CLIP_SAMPLES + ints[I_OFFSETS + seg % N_DISTINCT];
    let f0 = (g % DFT_BLOCKS) * DFT_FRAMES;
    for (var f = f0; f < min(f0 + DFT_FRAMES, N_FRAMES); f++) {
        for (var n = lid; n < N_FFT; n += WG) {
            buf[n] = vec2<f64>(window[n] * padded(base, f * HOP + n), f64(0.0));
        }
        workgroupBarrier();
        for (var k = lid; k < N_FREQS; k += WG) {
            var re = f64(0.0);
            var im = f64(0.0);
            var idx = 0u;
            for (var n = 0u; n < N_FFT; n++) {
                let t = tw(idx);
                let x = buf[n].x;
                re = re + x * t.x;
                im = im + x * t.y;
                idx += k;
                if (idx >= N_FFT) {
                    idx -= N_FFT;
                }
            }
            pw[k] = post_power(re * re + im * im);
        }
        workgroupBarrier();
        mel_frame(seg, lid, 0u, f);
        workgroupBarrier();
    }
}

// Any N_FFT, pass 2: `finish` for each segment.
@compute @workgroup_size(WG)
fn mel_finish(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let seg = group_index(wid);
    if (seg >= params.n_clips * N_DISTINCT) {
        return;
    }
    finish(seg, lid);
}

// Log, top_db against the segment's own peak, conversion, and every output position
// the distinct segment `seg` fills.
fn finish(seg: u32, lid: u32) {
    let clip = seg / N_DISTINCT;
    let d = seg % N_DISTINCT;
    // Log, and the peak of this segment for top_db.
    var peak = -3.0e38f;
    for (var i = lid; i < VPS; i += WG) {
        let y = log_scale(mel_load(seg, i));
        mel_store(seg, i, y);
        peak = max(peak, y);
    }
    red[lid] = peak;
    sync_mel();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
        workgroupBarrier();
    }
    let floor_db = red[0] - TOP_DB;

    // Every output position this distinct segment fills.
    let j0 = ints[I_MAP_START + d];
    let j1 = ints[I_MAP_START + d + 1u];
    for (var j = j0; j < j1; j++) {
        let dst = (clip * SEGS_PER_CLIP + ints[I_MAP_OUT + j]) * VPS;
        if (OUT_KIND == 0u) {
            for (var i = lid; i < VPS; i += WG) {
                out[dst + i] = bitcast<u32>(floored(mel_load(seg, i), floor_db));
            }
        } else {
            // VPS is even here (the host checks): two values per word.
            for (var i = lid; i < VPS / 2u; i += WG) {
                let lo = to_half(floored(mel_load(seg, 2u * i), floor_db));
                let hi = to_half(floored(mel_load(seg, 2u * i + 1u), floor_db));
                out[dst / 2u + i] = lo | (hi << 16u);
            }
        }
    }
}
