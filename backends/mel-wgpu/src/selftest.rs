//! The check every backend runs when it opens a device: the shader's accuracy rests on
//! error-free transformations (`dw.wgsl`: TwoSum, Veltkamp's split, Dekker's product),
//! which a compiler that reassociates float arithmetic silently turns into zeros (Mesa
//! does, for the unshielded forms). One small dispatch computes them on the adapter for
//! inputs whose exact results the host knows; the backend refuses an adapter that gets
//! any of them wrong, rather than produce spectrograms outside the 0.01 dB bound.

use std::sync::mpsc;

use wgpu::util::DeviceExt;

use crate::codegen::DW_SOURCE;

/// What the adapter's compiler did with compensated arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArithmeticCheck {
    /// Cases checked.
    pub cases: usize,
    /// Cases where the shielded TwoSum, split and Dekker product (what the shader uses)
    /// gave a wrong result: must be 0.
    pub shielded_wrong: usize,
    /// Cases where a TwoSum written without shields lost its error term (informational:
    /// says whether this compiler reassociates; the shader never relies on it).
    pub unshielded_wrong: usize,
}

impl ArithmeticCheck {
    /// Whether the shader's arithmetic is exact on this adapter.
    pub fn ok(&self) -> bool {
        self.shielded_wrong == 0
    }
}

const KERNEL: &str = r#"
struct Params {
    n_clips: u32,
    zero: u32,
    pad1: u32,
    pad2: u32,
}
@group(0) @binding(0) var<storage, read> inp: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> outp: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> params: Params;

fn two_sum_unshielded(a: f32, b: f32) -> f32 {
    let s = a + b;
    let bb = s - a;
    return (a - (s - bb)) + (b - bb);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&inp)) {
        return;
    }
    let ab = inp[i];
    let st = two_sum(ab, ab.yx);
    let sa = split(ab);
    let p = ab * ab.yx;
    let q = prod_err(p, sa, vec4<f32>(sa.yx, sa.wz));
    outp[3u * i] = st;
    outp[3u * i + 1u] = sa;
    outp[3u * i + 2u] = vec4<f32>(p.x, q.x, two_sum_unshielded(ab.x, ab.y), 0.0);
}
"#;

/// Inputs with non-zero rounding errors across magnitudes (and a few exact cases).
fn cases() -> Vec<[f32; 2]> {
    let mut v = vec![
        [1.0 + f32::EPSILON, 3.3e-8],
        [0.1, 0.2],
        [std::f32::consts::PI, std::f32::consts::E],
        [1.0e4, -1.0e-3],
        [0.707_106_77, -0.382_683_43],
        [2.5, 0.5],
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..250 {
        let mut r = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let m = (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            let e = ((x >> 8) % 24) as i32 - 12;
            m * 2f32.powi(e)
        };
        v.push([r(), r()]);
    }
    v
}

/// Runs the check on `device`.
pub(crate) fn run(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<ArithmeticCheck, String> {
    let src = format!("{KERNEL}\n{DW_SOURCE}");
    device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("melctl arithmetic check"),
        source: wgpu::ShaderSource::Wgsl(src.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("melctl arithmetic check"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    if let Some(e) = pollster::block_on(device.pop_error_scope()) {
        return Err(format!("the arithmetic check did not compile: {e}"));
    }
    let input = cases();
    let n = input.len();
    use wgpu::BufferUsages as U;
    let inp = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("check in"),
        contents: bytemuck::cast_slice(&input),
        usage: U::STORAGE,
    });
    let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("check params"),
        contents: bytemuck::cast_slice(&[0u32; 4]),
        usage: U::UNIFORM,
    });
    let bytes = (n * 3 * 16) as u64;
    let out = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("check out"),
        size: bytes,
        usage: U::STORAGE | U::COPY_SRC,
        mapped_at_creation: false,
    });
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("check readback"),
        size: bytes,
        usage: U::MAP_READ | U::COPY_DST,
        mapped_at_creation: false,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("check"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: inp.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: out.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: params.as_entire_binding(),
            },
        ],
    });
    let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(n.div_ceil(64) as u32, 1, 1);
    }
    enc.copy_buffer_to_buffer(&out, 0, &readback, 0, bytes);
    let index = queue.submit([enc.finish()]);
    let (tx, rx) = mpsc::channel();
    readback.slice(..).map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device
        .poll(wgpu::PollType::WaitForSubmissionIndex(index))
        .map_err(|e| format!("the arithmetic check: {e}"))?;
    rx.recv()
        .map_err(|_| "the arithmetic check's readback was dropped".to_string())?
        .map_err(|e| format!("the arithmetic check's readback: {e}"))?;
    let got: Vec<[f32; 4]> = bytemuck::cast_slice(&readback.slice(..).get_mapped_range()).to_vec();
    readback.unmap();
    Ok(judge(&input, &got))
}

/// Compares the device's results with the exact ones.
fn judge(input: &[[f32; 2]], got: &[[f32; 4]]) -> ArithmeticCheck {
    let mut check = ArithmeticCheck {
        cases: input.len(),
        shielded_wrong: 0,
        unshielded_wrong: 0,
    };
    for (i, &[a, b]) in input.iter().enumerate() {
        let [st, sa, pq] = [got[3 * i], got[3 * i + 1], got[3 * i + 2]];
        // TwoSum: s is a + b rounded, s + t is a + b exactly (f64 holds both sums).
        let exact = a as f64 + b as f64;
        let two_sum_ok = |s: f32, t: f32| s == a + b && s as f64 + t as f64 == exact;
        // Split: hi + lo == x, both with at most 12 significant bits (13 trailing zero
        // bits of the mantissa for a normal hi; lo may have its sign bit spent).
        let split_ok = |x: f32, hi: f32, lo: f32| {
            hi + lo == x && hi.to_bits() & 0xfff == 0 && lo.to_bits() & 0x7ff == 0
        };
        // Dekker: p + q == a·b exactly (the product of two f32 is exact in f64).
        let prod_ok = pq[0] == a * b && pq[0] as f64 + pq[1] as f64 == a as f64 * b as f64;
        let ok = two_sum_ok(st[0], st[2])
            && two_sum_ok(st[1], st[3])
            && split_ok(a, sa[0], sa[2])
            && split_ok(b, sa[1], sa[3])
            && prod_ok;
        if !ok {
            check.shielded_wrong += 1;
        }
        if (a + b) as f64 + pq[2] as f64 != exact {
            check.unshielded_wrong += 1;
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_accepts_exact_results_and_catches_lost_error_terms() {
        let input = cases();
        let exact: Vec<[f32; 4]> = input
            .iter()
            .flat_map(|&[a, b]| {
                let s = a + b;
                let t = (a as f64 + b as f64 - s as f64) as f32;
                let split = |x: f32| {
                    let c = 4097.0 * x;
                    let hi = c - (c - x);
                    [hi, x - hi]
                };
                let ([ha, la], [hb, lb]) = (split(a), split(b));
                let p = a * b;
                let q = (a as f64 * b as f64 - p as f64) as f32;
                [[s, s, t, t], [ha, hb, la, lb], [p, q, 0.0, 0.0]]
            })
            .collect();
        let c = judge(&input, &exact);
        assert_eq!(c.shielded_wrong, 0);
        // The unshielded TwoSum output slot holds 0 here: every case with a rounding
        // error counts as lost, and there are many.
        assert!(c.unshielded_wrong > input.len() / 2, "{c:?}");
        // A device that folded the TwoSum to 0 is caught.
        let mut folded = exact.clone();
        folded[0][2] = 0.0;
        assert_eq!(judge(&input, &folded).shielded_wrong, 1);
    }
}
