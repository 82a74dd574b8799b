// rmsnorm: call kb from Go through cgo and its C ABI (kb.h), with no modules: load a Definition,
// run kb's CPU RMSNorm on tensors Go owns (pinned for the call), and check the result against the
// same formula computed here.
//
//	$ CGO_CFLAGS=-I<kb>/include CGO_LDFLAGS="-L<dir of libkb.so> -lkb" go build -o kb_example_rmsnorm_go rmsnorm.go
//	$ ./kb_example_rmsnorm_go kernels/rmsnorm/definitions/rmsnorm_h4096.json
//	rmsnorm_h4096: kb_cpu_rmsnorm on 3 x 4096 bfloat16 rows: largest difference 0 (allowed 0.01 + 0.01 |y|)
//
// Exit status 0 when every element is within FlashInfer-Bench's tolerance, 1 on a kb error (the
// message is kb_last_error(), which names the file) or a mismatch, 2 on bad usage.
package main

/*
#cgo LDFLAGS: -lkb
#include <stdlib.h>
#include <kb/kb.h>

// Everything kb sees (the DLTensors, their shapes, the data) is in C memory: cgo forbids passing
// Go memory that holds Go pointers, and a DLTensor holds pointers. The array of tensor pointers
// kb_solution_run takes is built here, on the C side.
static DLTensor* kb_example_tensors(int n) { return (DLTensor*)calloc((size_t)n, sizeof(DLTensor)); }
static int64_t* kb_example_shape(int rank) { return (int64_t*)calloc((size_t)rank, sizeof(int64_t)); }
static kb_status kb_example_run(kb_context* ctx, const kb_definition* def, const char* solution,
                                DLTensor* in, size_t n_in, DLTensor* out, size_t n_out) {
  const DLTensor* ins[8];
  const DLTensor* outs[8];
  size_t i;
  for (i = 0; i < n_in && i < 8; ++i) ins[i] = &in[i];
  for (i = 0; i < n_out && i < 8; ++i) outs[i] = &out[i];
  return kb_solution_run(ctx, def, solution, ins, n_in, outs, n_out, NULL);
}
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"unsafe"
)

// kb_last_error() is the calling thread's, and cgo may run a goroutine's C calls on different OS
// threads: main stays on one, so the message read after a failed call is that call's.
func init() { runtime.LockOSThread() }

// kbError is a failed kb call: "what: STATUS: kb_last_error()".
func kbError(what string, s C.kb_status) error {
	return fmt.Errorf("%s: %s: %s", what, C.GoString(C.kb_status_string(s)), C.GoString(C.kb_last_error()))
}

func bf16ToF32(v uint16) float32 { return math.Float32frombits(uint32(v) << 16) }

func f32ToBF16(x float32) uint16 { // round to nearest even (finite inputs)
	b := math.Float32bits(x)
	return uint16((b + 0x7fff + ((b >> 16) & 1)) >> 16)
}

// setBF16 makes t a host bfloat16 tensor of `shape` over C memory `data`.
func setBF16(t *C.DLTensor, data unsafe.Pointer, shape []int64) {
	t.data = data
	t.device.device_type = C.kDLCPU
	t.device.device_id = 0
	t.ndim = C.int32_t(len(shape))
	t.dtype.code = C.kDLBfloat
	t.dtype.bits = 16
	t.dtype.lanes = 1
	t.shape = C.kb_example_shape(C.int(len(shape)))
	dims := unsafe.Slice((*int64)(unsafe.Pointer(t.shape)), len(shape))
	copy(dims, shape)
}

func run(path string) error {
	var ctx *C.kb_context
	if s := C.kb_context_create(nil, C.KB_ABI_VERSION, &ctx); s != C.KB_OK {
		return kbError("kb_context_create", s)
	}
	defer C.kb_context_destroy(ctx)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var def *C.kb_definition
	if s := C.kb_definition_load_file(ctx, cpath, &def); s != C.KB_OK {
		return kbError("cannot load the definition", s)
	}
	defer C.kb_definition_destroy(def)

	const rows, hidden = 3, 4096
	const eps = 1e-5
	// Tensor data in C memory too, viewed from Go as slices.
	xp := (*uint16)(C.calloc(rows*hidden, 2))
	wp := (*uint16)(C.calloc(hidden, 2))
	yp := (*uint16)(C.calloc(rows*hidden, 2))
	defer C.free(unsafe.Pointer(xp))
	defer C.free(unsafe.Pointer(wp))
	defer C.free(unsafe.Pointer(yp))
	x, w, y := unsafe.Slice(xp, rows*hidden), unsafe.Slice(wp, hidden), unsafe.Slice(yp, rows*hidden)
	seed := uint32(12345) // a linear congruential generator: the same inputs every run
	next := func() float32 {
		seed = seed*1664525 + 1013904223
		return float32(seed>>8) / float32(1<<24)
	}
	for i := range x {
		x[i] = f32ToBF16(next()*4 - 2)
	}
	for i := range w {
		w[i] = f32ToBF16(next() + 0.5)
	}
	for i := range y {
		y[i] = 0xffff // NaN: a call that writes nothing fails the check
	}
	in := C.kb_example_tensors(2)
	out := C.kb_example_tensors(1)
	defer C.free(unsafe.Pointer(in))
	defer C.free(unsafe.Pointer(out))
	ins := unsafe.Slice(in, 2)
	outs := unsafe.Slice(out, 1)
	setBF16(&ins[0], unsafe.Pointer(xp), []int64{rows, hidden})
	setBF16(&ins[1], unsafe.Pointer(wp), []int64{hidden})
	setBF16(&outs[0], unsafe.Pointer(yp), []int64{rows, hidden})
	defer func() {
		for _, t := range []*C.DLTensor{&ins[0], &ins[1], &outs[0]} {
			C.free(unsafe.Pointer(t.shape))
		}
	}()
	solution := C.CString("kb_cpu_rmsnorm")
	defer C.free(unsafe.Pointer(solution))
	if s := C.kb_example_run(ctx, def, solution, in, 2, out, 1); s != C.KB_OK {
		return kbError("kb_solution_run", s)
	}
	// The definition's reference: x * rsqrt(mean(x^2) + eps) * w in fp32, rounded to bfloat16.
	worst := float32(0)
	for r := 0; r < rows; r++ {
		row := x[r*hidden : (r+1)*hidden]
		var ms float32
		for _, v := range row {
			ms += bf16ToF32(v) * bf16ToF32(v)
		}
		inv := 1 / float32(math.Sqrt(float64(ms/hidden+eps)))
		for k := 0; k < hidden; k++ {
			want := bf16ToF32(f32ToBF16(bf16ToF32(row[k]) * inv * bf16ToF32(w[k])))
			got := bf16ToF32(y[r*hidden+k])
			diff := float32(math.Abs(float64(got - want)))
			if !(diff <= 0.01+0.01*float32(math.Abs(float64(want)))) {
				return fmt.Errorf("row %d element %d: kb gave %v, expected %v", r, k, got, want)
			}
			if diff > worst {
				worst = diff
			}
		}
	}
	fmt.Printf("%s: kb_cpu_rmsnorm on %d x %d bfloat16 rows: largest difference %v (allowed 0.01 + 0.01 |y|)\n",
		C.GoString(C.kb_definition_name(def)), rows, hidden, worst)
	return nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: %s RMSNORM_DEFINITION.json (hidden size 4096)\n", os.Args[0])
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "kb_example_rmsnorm_go: %v\n", err)
		os.Exit(1)
	}
}
