// Any N_FFT: a direct real DFT per frame, in two passes (`mel_dft`, then
// `mel_finish`). Mel values always go through `scratch` (pass 2 reads them).
// Constants of this path: DFT_FRAMES, DFT_BLOCKS.
//
// The windowed samples are exact double-words (`dw.wgsl`), and each bin is a
// compensated dot product (Ogita, Rump and Oishi's Dot2): every product's error from
// Dekker's algorithm, every addition's from TwoSum, the twiddle's own f64 remainder, all
// gathered in a correction term added once at the end; so the error does not grow with
// N_FFT as a plain f32 sum's does. The twiddles are entries of the table
// exp(-2 pi i k / N_FFT) from f64, never powers.

// Sample n of the frame being transformed: (value, error, value's 12-bit split).
var<workgroup> frame_buf: array<vec4<f32>, N_FFT>;
var<workgroup> pw: array<f32, N_FREQS>;

// Mel sums of the power spectrum in `pw` into mel[.., frame].
fn mel_frame(seg: u32, lid: u32, frame: u32) {
    for (var m = lid; m < N_MELS; m += WG) {
        let k0 = ints[I_F_FIRST + m];
        let len = ints[I_F_LEN + m];
        let off = ints[I_F_OFF + m];
        var acc = 0.0f;
        for (var i = 0u; i < len; i++) {
            acc = fma(fw[off + i], pw[k0 + i], acc);
        }
        mel_store(seg, m * N_FRAMES + frame, acc);
    }
}

// Pass 1: DFT_FRAMES frames of one segment per workgroup (spreading a long segment
// over many workgroups: one workgroup doing a whole 1 s speech clip ran so long that
// lavapipe dropped the dispatch), mel sums into `scratch`.
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
        // The windowed sample exactly as a double-word, and the split of its value for the
        // products below.
        for (var n = lid; n < N_FFT; n += WG) {
            let w = window[n];
            let y = dw_scale(vec4<f32>(frame_raw(base, f, n), 0.0, 0.0, 0.0), w.x, w.y, w.zw);
            let sp = split(y.xy);
            frame_buf[n] = vec4<f32>(y.x, y.z, sp.x, sp.z);
        }
        workgroupBarrier();
        for (var k = lid; k < N_FREQS; k += WG) {
            var acc = vec2<f32>(0.0); // (re, im)
            var err = vec2<f32>(0.0); // what acc's roundings left out
            var idx = 0u;
            for (var n = 0u; n < N_FFT; n++) {
                let x = frame_buf[n];
                let t = twiddle[2u * idx];
                let p = x.x * t.xy;
                let q = prod_err(p, x.zzww, twiddle[2u * idx + 1u]);
                let st = two_sum(acc, p);
                acc = st.xy;
                err += st.zw + q + (x.y * t.xy + x.x * t.zw);
                idx += k;
                if (idx >= N_FFT) {
                    idx -= N_FFT;
                }
            }
            let z = acc + err;
            pw[k] = post_power(dot(z, z));
        }
        workgroupBarrier();
        mel_frame(seg, lid, f);
        workgroupBarrier();
    }
}

// Pass 2: `finish` for each segment.
@compute @workgroup_size(WG)
fn mel_finish(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let seg = group_index(wid);
    if (seg >= params.n_clips * N_DISTINCT) {
        return;
    }
    init_peak(lid);
    workgroupBarrier();
    finish(seg, lid);
}
