// Compensated ("double-word") f32 arithmetic: a value is carried as v + e, v its f32
// rounding and e (also f32) what the rounding left out, so the transform keeps about
// 2^-44 relative accuracy instead of f32's 2^-24 (docs/numerics.md, "Compensated
// float32 transforms": a plain f32 FFT misses torchaudio's f64 reference by up to
// 0.019 dB on bins 100 dB below the peak; this one by ~1e-5 dB, like the f64 backends).
//
// The error terms come from error-free transformations: TwoSum (Knuth) for a + b, and
// Dekker's product (Veltkamp splitting into 12-bit halves) for a·b: WGSL's `fma` may be
// evaluated unfused, so it cannot give a product's error. Both only work if every
// operation is rounded as written, and WGSL (like GLSL) lets drivers reassociate float
// arithmetic: Mesa folds (a + b) - a to b and a TwoSum to 0 (checked on lavapipe). So
// every intermediate of these transformations goes through `hide`: an OR with a zero
// read from a uniform, which no compiler can see through. On a GPU that is one integer
// operation, issued beside the float ones.
//
// A complex double-word value is a vec4: (v.re, v.im, e.re, e.im).

// x, unchanged, but opaque to the compiler.
fn hide(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) | params.zero);
}

fn hide2(x: vec2<f32>) -> vec2<f32> {
    return bitcast<vec2<f32>>(bitcast<vec2<u32>>(x) | vec2<u32>(params.zero));
}

// TwoSum: (s, t) with s = fl(a + b) and s + t = a + b exactly, for each component.
fn two_sum(a: vec2<f32>, b: vec2<f32>) -> vec4<f32> {
    let s = hide2(a + b);
    let bb = hide2(s - a);
    let aa = hide2(s - bb);
    let t = hide2(a - aa) + hide2(b - bb);
    return vec4<f32>(s, t);
}

// Veltkamp's split: (hi, lo) with a = hi + lo exactly, each of at most 12 significant
// bits, for each component.
fn split(a: vec2<f32>) -> vec4<f32> {
    let c = hide2(4097.0 * a);
    let hi = hide2(c - hide2(c - a));
    return vec4<f32>(hi, a - hi);
}

// Dekker: the exact error a·b - p of the rounded products p = fl(a·b), for each
// component, given the splits of a and b as (hi.xy, lo.xy).
fn prod_err(p: vec2<f32>, a: vec4<f32>, b: vec4<f32>) -> vec2<f32> {
    let t1 = hide2(a.xy * b.xy - p);
    let t2 = hide2(t1 + a.xy * b.zw);
    let t3 = hide2(t2 + a.zw * b.xy);
    return t3 + a.zw * b.zw;
}

// a + b.
fn dw_add(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    let st = two_sum(a.xy, b.xy);
    return vec4<f32>(st.xy, st.zw + (a.zw + b.zw));
}

// a - b.
fn dw_sub(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return dw_add(a, -b);
}

// a·(-i).
fn dw_negi(a: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(a.y, -a.x, a.w, -a.z);
}

// The pair (x, y) of real double-words (x.x + x.y, y.x + y.y) as the complex x + iy.
fn dw_complex(x: vec2<f32>, y: vec2<f32>) -> vec4<f32> {
    return vec4<f32>(x.x, y.x, x.y, y.y);
}

// Both components of a times the real constant c = hi + lo, with hs the split of hi.
fn dw_scale(a: vec4<f32>, hi: f32, lo: f32, hs: vec2<f32>) -> vec4<f32> {
    let p = a.xy * hi;
    let q = prod_err(p, split(a.xy), vec4<f32>(hs.xx, hs.yy));
    return vec4<f32>(p, q + (a.zw * hi + a.xy * lo));
}

// a times the twiddle w = th + tl (th = (re, im) rounded once, tl the rest), with ts the
// split of th as (re.hi, im.hi, re.lo, im.lo).
fn dw_cmul(a: vec4<f32>, th: vec2<f32>, tl: vec2<f32>, ts: vec4<f32>) -> vec4<f32> {
    let v = a.xy;
    let sv = split(v);
    let p1 = v * th; // (v.re·w.re, v.im·w.im)
    let p2 = v * th.yx; // (v.re·w.im, v.im·w.re)
    let q1 = prod_err(p1, sv, ts);
    let q2 = prod_err(p2, sv, vec4<f32>(ts.yx, ts.wz));
    let st = two_sum(vec2<f32>(p1.x, p2.x), vec2<f32>(-p1.y, p2.y));
    let e_re = st.z + (q1.x - q1.y) + (a.z * th.x - a.w * th.y) + (v.x * tl.x - v.y * tl.y);
    let e_im = st.w + (q2.x + q2.y) + (a.z * th.y + a.w * th.x) + (v.x * tl.y + v.y * tl.x);
    return vec4<f32>(st.xy, e_re, e_im);
}

// a's value rounded once to f32 (v + e).
fn dw_value(a: vec4<f32>) -> vec2<f32> {
    return a.xy + a.zw;
}
