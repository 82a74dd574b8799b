//! rmsnorm: call kb from Rust through its C ABI, with no crates: declare the few kb.h functions
//! and DLPack structs used, load a Definition, run kb's CPU RMSNorm on tensors this program
//! owns, and check the result against the same formula computed here.
//!
//!   $ rustc --edition 2021 -O rmsnorm.rs -L <dir of libkb.so> -l kb -o kb_example_rmsnorm_rust
//!   $ ./kb_example_rmsnorm_rust kernels/rmsnorm/definitions/rmsnorm_h4096.json
//!   rmsnorm_h4096: kb_cpu_rmsnorm on 3 x 4096 bfloat16 rows: largest difference 0 (allowed 0.01 + 0.01 |y|)
//!
//! Exit status 0 when every element is within FlashInfer-Bench's tolerance, 1 on a kb error (the
//! message is kb_last_error(), which names the file) or a mismatch, 2 on bad usage.
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};

// kb.h: the ABI version this program was written against, and the functions it calls.
const KB_ABI_VERSION: c_int = 1;
const KB_OK: c_int = 0;

#[repr(C)]
struct KbContext {
    _private: [u8; 0],
}
#[repr(C)]
struct KbDefinition {
    _private: [u8; 0],
}

// dlpack.h (v0.8 / v1.x DLTensor): kDLCPU = 1, kDLBfloat = 4.
#[repr(C)]
struct DLDevice {
    device_type: c_int,
    device_id: i32,
}
#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}
#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[link(name = "kb")]
extern "C" {
    fn kb_context_create(opts: *const c_void, abi_version: c_int, out: *mut *mut KbContext) -> c_int;
    fn kb_context_destroy(ctx: *mut KbContext);
    fn kb_definition_load_file(ctx: *mut KbContext, path: *const c_char, out: *mut *mut KbDefinition) -> c_int;
    fn kb_definition_destroy(def: *mut KbDefinition);
    fn kb_definition_name(def: *const KbDefinition) -> *const c_char;
    fn kb_status_string(status: c_int) -> *const c_char;
    fn kb_last_error() -> *const c_char;
    fn kb_solution_run(
        ctx: *mut KbContext,
        def: *const KbDefinition,
        solution: *const c_char,
        inputs: *const *const DLTensor,
        n_inputs: usize,
        outputs: *const *const DLTensor,
        n_outputs: usize,
        stream: *mut c_void,
    ) -> c_int;
}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

// A kb status as an error message: "what: STATUS: kb_last_error()".
fn check(what: &str, status: c_int) -> Result<(), String> {
    if status == KB_OK {
        return Ok(());
    }
    Err(format!("{}: {}: {}", what, text(unsafe { kb_status_string(status) }), text(unsafe { kb_last_error() })))
}

fn bf16_to_f32(v: u16) -> f32 {
    f32::from_bits((v as u32) << 16)
}

fn f32_to_bf16(x: f32) -> u16 {
    // round to nearest even (inputs here are finite)
    let b = x.to_bits();
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

// A host bfloat16 tensor view over `data`, shaped `shape`.
fn bf16_tensor(data: &mut [u16], shape: &mut [i64]) -> DLTensor {
    DLTensor {
        data: data.as_mut_ptr() as *mut c_void,
        device: DLDevice { device_type: 1, device_id: 0 },
        ndim: shape.len() as i32,
        dtype: DLDataType { code: 4, bits: 16, lanes: 1 },
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

fn run(path: &str) -> Result<(), String> {
    let mut ctx: *mut KbContext = std::ptr::null_mut();
    check("kb_context_create", unsafe { kb_context_create(std::ptr::null(), KB_ABI_VERSION, &mut ctx) })?;
    let mut def: *mut KbDefinition = std::ptr::null_mut();
    let cpath = CString::new(path).map_err(|_| "the path has a NUL byte".to_string())?;
    let loaded = check("cannot load the definition", unsafe { kb_definition_load_file(ctx, cpath.as_ptr(), &mut def) });
    let result = loaded.and_then(|_| compare(ctx, def));
    unsafe {
        kb_definition_destroy(def);
        kb_context_destroy(ctx);
    }
    result
}

fn compare(ctx: *mut KbContext, def: *mut KbDefinition) -> Result<(), String> {
    const ROWS: usize = 3;
    const HIDDEN: usize = 4096;
    const EPS: f32 = 1e-5;
    // Deterministic inputs (a linear congruential generator), in bfloat16.
    let mut seed: u32 = 12345;
    let mut next = || {
        seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
        (seed >> 8) as f32 / (1u32 << 24) as f32
    };
    let mut x: Vec<u16> = (0..ROWS * HIDDEN).map(|_| f32_to_bf16(next() * 4.0 - 2.0)).collect();
    let mut w: Vec<u16> = (0..HIDDEN).map(|_| f32_to_bf16(next() + 0.5)).collect();
    let mut y = vec![0xffffu16; ROWS * HIDDEN];
    let (mut xs, mut ws, mut ys) = ([ROWS as i64, HIDDEN as i64], [HIDDEN as i64], [ROWS as i64, HIDDEN as i64]);
    let tx = bf16_tensor(&mut x, &mut xs);
    let tw = bf16_tensor(&mut w, &mut ws);
    let ty = bf16_tensor(&mut y, &mut ys);
    let inputs = [&tx as *const DLTensor, &tw as *const DLTensor];
    let outputs = [&ty as *const DLTensor];
    let solution = CString::new("kb_cpu_rmsnorm").unwrap();
    check("kb_solution_run", unsafe {
        kb_solution_run(ctx, def, solution.as_ptr(), inputs.as_ptr(), 2, outputs.as_ptr(), 1, std::ptr::null_mut())
    })?;
    // The definition's reference: x * rsqrt(mean(x^2) + eps) * w, in fp32, rounded to bfloat16.
    let mut worst = 0.0f32;
    for r in 0..ROWS {
        let row = &x[r * HIDDEN..(r + 1) * HIDDEN];
        let ms: f32 = row.iter().map(|&v| bf16_to_f32(v) * bf16_to_f32(v)).sum::<f32>() / HIDDEN as f32;
        let inv = 1.0 / (ms + EPS).sqrt();
        for k in 0..HIDDEN {
            let want = bf16_to_f32(f32_to_bf16(bf16_to_f32(row[k]) * inv * bf16_to_f32(w[k])));
            let got = bf16_to_f32(y[r * HIDDEN + k]);
            let diff = (got - want).abs();
            if !(diff <= 0.01 + 0.01 * want.abs()) {
                return Err(format!("row {} element {}: kb gave {}, expected {}", r, k, got, want));
            }
            worst = worst.max(diff);
        }
    }
    println!(
        "{}: kb_cpu_rmsnorm on {} x {} bfloat16 rows: largest difference {} (allowed 0.01 + 0.01 |y|)",
        text(unsafe { kb_definition_name(def) }),
        ROWS,
        HIDDEN,
        worst
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 {
        eprintln!("usage: {} RMSNORM_DEFINITION.json (hidden size 4096)", args[0]);
        std::process::exit(2);
    }
    if let Err(e) = run(&args[1]) {
        eprintln!("kb_example_rmsnorm_rust: {}", e);
        std::process::exit(1);
    }
}
