/*
 * kb.h: the C ABI of kb, a kernel benchmark runtime for the FlashInfer Trace format.
 *
 * This header is the manual. It is C99 (it also compiles as C++), every symbol it declares begins
 * with kb_ or KB_, and it depends only on the C standard library and <dlpack/dlpack.h>.
 *
 * WHAT IS HERE (since 0.1)
 *   - version and ABI queries                       kb_version, kb_abi_version, kb_build_info
 *   - one error model                               kb_status, kb_status_string, kb_last_error
 *   - element types                                 kb_dtype and conversions to names and DLPack
 *   - a context                                     kb_context_create / kb_context_destroy
 *   - kernel Definitions: load (JSON text, a file, or by name from a dataset directory), inspect,
 *     and check caller tensors (DLPack DLTensor views) against a definition's signature and constraints
 *   - Workloads, Solutions and results (Trace records): load and inspect
 *   - CUDA device discovery                         kb_cuda_device_count, kb_cuda_device_get
 *   - outside solutions: plugins and built Solution JSON, run in a watched worker process
 *                                                   kb_plugin_load, kb_plugin_benchmark_run, ...
 *   - running kb's solutions on caller tensors         kb_solution_run (CPU, or CUDA on a caller's stream)
 *   - judging and timing one workload                  kb_benchmark_run
 *   - running a whole dataset as `kb bench` does       kb_bench_run, one event per result
 *   - dispatch for engines: the fastest PASSED solution for a call's shapes, from recorded traces
 *                                                   kb_dispatch_create, kb_dispatch_run
 *   - per-context tuning settings and a log callback   kb_context_options.tuning, .log
 *
 *   - model-level records: Kernel Calling Records, Benchmark Results and Agent traces, read,
 *     validated and written                            kb_calling_record_load, kb_agent_trace_load, ...
 *   - a model step's estimated time, baseline against the best PASSED solutions, from a calling
 *     record and recorded traces                     kb_estimate_create
 *
 * CONVENTIONS (they hold for every declaration below unless it says otherwise)
 *
 *   Status. Every fallible function returns a kb_status; KB_OK (0) is success. The numeric values
 *   are pinned forever. A function that fails also records a one-line, human-readable message for
 *   the calling thread, read with kb_last_error(). Successful calls do not clear that message (like
 *   errno): read it only right after a call that failed.
 *
 *   Handles. kb_context, kb_definition, kb_workload, kb_solution and kb_result are opaque. What a
 *   function hands back through a `T** out` parameter belongs to the caller and is released with the
 *   matching kb_T_destroy(); every destroy function accepts NULL and does nothing with it. On failure
 *   such a function sets *out to NULL (when `out` itself is not NULL). A handle does not refer to
 *   the context that created it: it may outlive it.
 *
 *   Borrowed strings. A `const char*` returned by an accessor, or stored by one into an out-struct,
 *   is borrowed from the handle passed in: it stays valid and unchanged until that handle is
 *   destroyed. It is NUL-terminated UTF-8. The caller never frees it.
 *
 *   NULL. Passing NULL for a pointer parameter that is not documented as nullable makes a
 *   kb_status function return KB_ERROR_INVALID_ARGUMENT (message "<function>: argument `x` is
 *   NULL"); accessors that return a pointer or a count return NULL or 0 and record the same message.
 *
 *   Structs that cross the ABI start with `size_t struct_size`. Initialize each with its KB_..._INIT
 *   macro (or set struct_size = sizeof(the struct)). kb reads or fills only the fields of the
 *   version it was built with, so a caller compiled against a newer, larger struct keeps working;
 *   an input struct that grew (fields marked "added after version 1") is read only as far as the
 *   caller's struct_size reaches, the rest taking their defaults, so a caller compiled against an
 *   older header keeps working too; a struct_size smaller than the version-1 size is rejected
 *   with KB_ERROR_INVALID_ARGUMENT.
 *
 *   Threads. Every function may be called from any thread. Handles are immutable once created:
 *   any number of threads may use the same kb_context, kb_definition, kb_workload, kb_solution or
 *   kb_result concurrently, except that destroying a handle must not race with any other use of it.
 *   kb_last_error() is per thread.
 *
 *   The library never prints, aborts or exits, and no C++ exception crosses this ABI.
 *
 *   Tensors are borrowed DLPack DLTensor views (data, device, ndim, dtype, shape, strides in
 *   elements, byte_offset); kb never keeps a pointer into them after a call returns.
 */
#ifndef KB_KB_H
#define KB_KB_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#if defined(__GNUC__) || defined(__clang__)
#define KB_API __attribute__((visibility("default")))
#else
#define KB_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Versions ================================================================================= */

/* Version of this header (semantic versioning). Since 0.1. */
#define KB_VERSION_MAJOR 0
#define KB_VERSION_MINOR 1
#define KB_VERSION_PATCH 0
#define KB_VERSION_STRING "0.1.0"

/* ABI version of this header: bumped only when a change breaks binary compatibility. Pass it to
 * kb_context_create(), which refuses a library of another ABI version. Since 0.1. */
#define KB_ABI_VERSION 1

/* The library's version, "MAJOR.MINOR.PATCH" (e.g. "0.1.0"), which may differ from
 * KB_VERSION_STRING when the program runs against another build of libkb.
 * Returns a static string; never NULL. Thread-safe. Since 0.1. */
KB_API const char* kb_version(void);

/* The library's ABI version (KB_ABI_VERSION of the header it was built from).
 * Thread-safe. Since 0.1. */
KB_API int kb_abi_version(void);

/* One line describing the build: "kb 0.1.0 abi=1 cuda=on" (cuda=off when built without CUDA).
 * Returns a static string; never NULL. Thread-safe. Since 0.1. */
KB_API const char* kb_build_info(void);

/* ==== Errors =================================================================================== */

/* Result of every fallible call. Values are pinned forever; new codes may be added at the end.
 * Since 0.1. */
typedef enum kb_status {
  KB_OK = 0,
  KB_ERROR_INVALID_ARGUMENT = 1, /* the caller passed something unusable (NULL, bad index, bad tensor) */
  KB_ERROR_PARSE = 2,            /* text is not well-formed (JSON, expression) */
  KB_ERROR_INVALID_DATA = 3,     /* well-formed but breaks a rule of the format */
  KB_ERROR_IO = 4,               /* a file cannot be read */
  KB_ERROR_NOT_FOUND = 5,        /* a named thing does not exist */
  KB_ERROR_UNSUPPORTED = 6,      /* a valid request this build of kb cannot serve */
  KB_ERROR_LIMIT = 7,            /* input larger or deeper than kb accepts */
  KB_ERROR_OUT_OF_MEMORY = 8,
  KB_ERROR_NO_CUDA_DEVICE = 9,   /* built with CUDA, but no usable driver or GPU */
  KB_ERROR_CUDA = 10,            /* a CUDA call failed */
  KB_ERROR_ABI_MISMATCH = 11,    /* header and library ABI versions differ */
  KB_ERROR_INTERNAL = 12,        /* a bug in kb */
  KB_STATUS_FORCE_32BIT = 0x7fffffff
} kb_status;

/* A short English name of a status ("ok", "invalid argument", "parse error", ...); "unknown status"
 * for values outside the enum. Returns a static string; never NULL. Thread-safe. Since 0.1. */
KB_API const char* kb_status_string(kb_status status);

/* The message recorded by the most recent failing kb call on the calling thread, one line without
 * a trailing newline, e.g. "defs/x.json: definition.inputs.q.shape[2]: unknown axis \"H\"".
 * Returns "" when no kb call on this thread has failed yet; never NULL. Every call that fails
 * (returns a status other than KB_OK, or NULL where a pointer was expected) sets it; successful
 * calls leave it unchanged. The string belongs to kb and stays valid until the next failing kb call
 * on the same thread, or the thread's exit. Thread-safe (per thread). Since 0.1. */
KB_API const char* kb_last_error(void);

/* ==== Element types ============================================================================= */

/* The 11 element types of FlashInfer Trace definitions. Values pinned. Since 0.1. */
typedef enum kb_dtype {
  KB_DTYPE_FLOAT32 = 0,
  KB_DTYPE_FLOAT16 = 1,
  KB_DTYPE_BFLOAT16 = 2,
  KB_DTYPE_FLOAT8_E4M3FN = 3,
  KB_DTYPE_FLOAT8_E5M2 = 4,
  KB_DTYPE_FLOAT4_E2M1 = 5, /* stored two values a byte */
  KB_DTYPE_INT64 = 6,
  KB_DTYPE_INT32 = 7,
  KB_DTYPE_INT16 = 8,
  KB_DTYPE_INT8 = 9,
  KB_DTYPE_BOOL = 10,
  KB_DTYPE_FORCE_32BIT = 0x7fffffff
} kb_dtype;

/* DLPack type codes that dlpack.h 0.6 (Debian's libdlpack-dev) does not name. DLPack 1.x gives
 * them the same numbers (kDLBool, kDLFloat8_e4m3fn, kDLFloat8_e5m2, kDLFloat4_e2m1fn). Since 0.1. */
#define KB_DLPACK_BOOL 6
#define KB_DLPACK_FLOAT8_E4M3FN 10
#define KB_DLPACK_FLOAT8_E5M2 12
#define KB_DLPACK_FLOAT4_E2M1FN 17

/* The canonical FlashInfer Trace name of a dtype ("float32", "float8_e4m3fn", "bool", ...).
 * Returns a static string, or NULL (recording a message) for a value outside kb_dtype.
 * Thread-safe. Since 0.1. */
KB_API const char* kb_dtype_name(kb_dtype dtype);

/* Looks up a dtype by name: the canonical names and the seed-001 alias "float8_e4m3".
 *   name (in)  NUL-terminated name.
 *   out  (out) the dtype; unchanged on failure.
 * Returns KB_OK, KB_ERROR_NOT_FOUND (unknown name) or KB_ERROR_INVALID_ARGUMENT (NULL argument).
 * Thread-safe. Since 0.1. */
KB_API kb_status kb_dtype_from_name(const char* name, kb_dtype* out);

/* The DLPack type a caller's tensor of `dtype` carries: float32 {kDLFloat, 32, 1}, bfloat16
 * {kDLBfloat, 16, 1}, float8_e4m3fn {10, 8, 1}, float8_e5m2 {12, 8, 1}, float4_e2m1 {17, 4, 2} (two
 * values per element, as torch's float4_e2m1fn_x2), int32 {kDLInt, 32, 1}, bool {6, 8, 1}, ...
 *   out (out) the DLPack type; unchanged on failure.
 * Returns KB_OK or KB_ERROR_INVALID_ARGUMENT (NULL out, dtype outside the enum). Thread-safe.
 * Since 0.1. */
KB_API kb_status kb_dtype_to_dlpack(kb_dtype dtype, DLDataType* out);

/* ==== Context ================================================================================== */

/* The root handle. Every load function takes one; it holds the settings that kb's solutions, timer
 * and workers use during the calls made with it (its tuning string, below) and where their
 * diagnostics go (its log callback). Two contexts in one process may differ. Since 0.1. */
typedef struct kb_context kb_context;

/* Severity of a diagnostic passed to a kb_log_fn, most severe first. Since 0.1. */
typedef enum kb_log_level {
  KB_LOG_ERROR = 1, /* something failed that the call's status does not say */
  KB_LOG_WARN = 2,  /* kb went on, but not as asked */
  KB_LOG_INFO = 3   /* notes: each cuBLASLt plan's choice and its candidates' times, each gemm race's
                       result, a context's settings that differ from the process defaults */
} kb_log_level;

/* Receives one diagnostic: `message` is one line of UTF-8, valid only during the call. Called on
 * the thread of the kb call that emits it, from any thread that uses the context; it must not call
 * into kb. Since 0.1. */
typedef void (*kb_log_fn)(kb_log_level level, const char* message, void* user_data);

/* Options for kb_context_create(). Since 0.1.
 *
 * tuning: "name=value,name=value" (spaces around names and values ignored; NULL or "" changes
 * nothing). A context with a tuning string takes the process defaults as they are at
 * kb_context_create() with these values over them; one without follows the process defaults at each
 * call. The process defaults are kb's built-in values with the environment variable of each name
 * (KB_ and the name in capitals) applied where it is set to an allowed value (the kb command
 * refuses a bad one). The names, their values and defaults:
 *   gemm_race          0|1          1      kb_cuda_gemm times its candidate forms on a problem's first
 *                                          uncaptured call and keeps the fastest; 0: its static rule
 *   gemm_race_file     <path>|""    ""     JSON-lines file keeping those winners across processes
 *                                          (see kb_gemm_race_file_set)
 *   cublaslt_autotune  0|1          1      kb's cuBLASLt plans time their candidate algorithms; 0: the
 *                                          heuristic's first
 *   l2_flush           clean|write  clean  how a cold timing sample's L2 flush leaves the L2
 *   throttle_threshold [0, 1]       0.75   timed batches under this fraction of the maximum SM clock
 *                                          are set aside (0 keeps all)
 *   cupti_library      <path>|""    ""     the libcupti to open ("": the usual places)
 *   python             <program>    python3  the interpreter for definitions' PyTorch references
 *   cache_dir          <path>|""    ""     Solution JSON build cache ("": $XDG_CACHE_HOME/kb, ~/.cache/kb)
 *   worker             <path>|""    ""     the kb-worker executable ("": the build's, then the installed)
 *   log                off|error|warn|info  warn  the least severe diagnostic passed to `log`
 * Outside solutions run in a kb-worker process, which reads the environment, not the context.
 *
 * log, log_user_data: where the diagnostics of calls made with this context go (level filtered by
 * the tuning name `log`); NULL: to the process's sink, which is none in a program that did not
 * install one (the kb command prints them). The library itself never writes to stdout or stderr. */
typedef struct kb_context_options {
  size_t struct_size; /* sizeof(kb_context_options) */
  uint32_t flags;     /* reserved: must be 0 */
  /* Added after version 1 (read only when struct_size reaches them; defaults NULL): */
  const char* tuning;  /* nullable; copied */
  kb_log_fn log;       /* nullable */
  void* log_user_data; /* passed to log */
} kb_context_options;

#define KB_CONTEXT_OPTIONS_INIT {sizeof(kb_context_options), 0u, NULL, NULL, NULL}

/* Creates a context.
 *   opts        (in, nullable) options; NULL means defaults (KB_CONTEXT_OPTIONS_INIT). Not kept.
 *   abi_version (in)  pass KB_ABI_VERSION: the ABI version of the header the caller was built with.
 *   out         (out) the new context, owned by the caller until kb_context_destroy().
 * Returns KB_OK; KB_ERROR_ABI_MISMATCH when abi_version differs from kb_abi_version();
 * KB_ERROR_INVALID_ARGUMENT for NULL out, opts->struct_size below the version-1 size, nonzero
 * reserved flags, or a tuning string with an unknown name or a value it does not allow (the message
 * names it and its environment variable); KB_ERROR_OUT_OF_MEMORY. With log set and tuning's log at
 * info, the new context's settings that differ from the process defaults are passed to log.
 * Thread-safe. Since 0.1. */
KB_API kb_status kb_context_create(const kb_context_options* opts, int abi_version, kb_context** out);

/* Destroys a context. NULL does nothing. Handles created with it stay valid. Must not race with
 * another use of the same context. Since 0.1. */
KB_API void kb_context_destroy(kb_context* ctx);

/* ==== Definitions ============================================================================== */

/* A kernel Definition (FlashInfer Trace): named axes, the input and output tensors in call order,
 * constraints, tags and a Python reference. Immutable. Since 0.1. */
typedef struct kb_definition kb_definition;

/* Reads a Definition from JSON text (FlashInfer Trace, or the older seed-001 dialect) and checks
 * it: required fields, kinds, dtypes, shape axes declared, names disjoint, `def run` present,
 * constraints parse and, where only const axes are involved, hold.
 *   ctx  (in)  a context.
 *   json (in)  the JSON text: `len` bytes, no NUL terminator needed. Not kept.
 *   len  (in)  its length in bytes.
 *   out  (out) the definition, owned by the caller until kb_definition_destroy().
 * Returns KB_OK; KB_ERROR_PARSE (not JSON); KB_ERROR_INVALID_DATA (breaks a rule; kb_last_error()
 * gives the first problem as "<memory>: json.path: message", plus "(and N more errors)");
 * KB_ERROR_LIMIT (document too large or deep); KB_ERROR_INVALID_ARGUMENT; KB_ERROR_OUT_OF_MEMORY.
 * Thread-safe. Since 0.1. */
KB_API kb_status kb_definition_load(kb_context* ctx, const char* json, size_t len, kb_definition** out);

/* As kb_definition_load(), reading the file at `path` (NUL-terminated). Messages name the file:
 * "path: definition.axes.H.type: expected \"const\" or \"var\", got \"x\"". Also returns KB_ERROR_IO
 * when the file cannot be read. Thread-safe. Since 0.1. */
KB_API kb_status kb_definition_load_file(kb_context* ctx, const char* path, kb_definition** out);

/* As kb_definition_load_file(), finding the file by the definition's name in a directory, as
 * `kb show DATASET NAME` does.
 *   ctx  (in)  a context.
 *   dir  (in)  NUL-terminated path of a FlashInfer-Bench dataset (its definitions/ folder is searched)
 *              or of any folder of definition .json files (searched recursively).
 *   name (in)  NUL-terminated definition name, e.g. "rmsnorm_h4096".
 *   out  (out) the definition, owned by the caller until kb_definition_destroy().
 * The file <name>.json is tried first, then every definition under it (a file may be named
 * otherwise). Returns KB_OK; KB_ERROR_NOT_FOUND when no definition has that name (the message names
 * the directory and the nearest names: "no definition "rmsnorm_h4069" in DIR (N definitions); did
 * you mean rmsnorm_h4096?"); the statuses of kb_definition_load_file() when <name>.json names it but
 * is not a valid definition; KB_ERROR_IO when dir is not a directory; KB_ERROR_INVALID_ARGUMENT for
 * NULL arguments or an empty name. Thread-safe. Since 0.1 (ABI version 1, added after its first
 * release). */
KB_API kb_status kb_definition_load_by_name(kb_context* ctx, const char* dir, const char* name, kb_definition** out);

/* Destroys a definition and every string borrowed from it. NULL does nothing. Since 0.1. */
KB_API void kb_definition_destroy(kb_definition* def);

/* The definition's name, e.g. "gqa_paged_decode_h16_kv2_d128_ps64". Borrowed; NULL for a NULL
 * handle. Since 0.1. */
KB_API const char* kb_definition_name(const kb_definition* def);

/* Its op_type, e.g. "gqa_paged". Borrowed; NULL for a NULL handle. Since 0.1. */
KB_API const char* kb_definition_op_type(const kb_definition* def);

/* Its description, or NULL when it has none (or def is NULL). Borrowed. Since 0.1. */
KB_API const char* kb_definition_description(const kb_definition* def);

/* Its Python reference source (with a top-level `def run`). Borrowed; NULL for a NULL handle.
 * Since 0.1. */
KB_API const char* kb_definition_reference(const kb_definition* def);

/* The definition as canonical FlashInfer Trace JSON (2-space indented, fields in FlashInfer-Bench's
 * order; the seed-001 dialect is written in the current spelling). Reads back to an equal
 * definition. Borrowed; NULL for a NULL handle. Since 0.1. */
KB_API const char* kb_definition_json(const kb_definition* def);

/* Kinds of axes. Values pinned. Since 0.1. */
typedef enum kb_axis_kind {
  KB_AXIS_CONST = 0, /* fixed by the definition */
  KB_AXIS_VAR = 1,   /* bound by each workload or call */
  KB_AXIS_KIND_FORCE_32BIT = 0x7fffffff
} kb_axis_kind;

/* One axis of a definition. Since 0.1. */
typedef struct kb_axis_info {
  size_t struct_size;      /* in: sizeof(kb_axis_info) */
  const char* name;        /* out: borrowed */
  kb_axis_kind kind;       /* out */
  int64_t value;           /* out: the value of a const axis; 0 for a var axis */
  const char* description; /* out: borrowed, NULL if none */
} kb_axis_info;

#define KB_AXIS_INFO_INIT {sizeof(kb_axis_info), NULL, KB_AXIS_VAR, 0, NULL}

/* Number of axes (0 for a NULL handle). Axis indices 0..count-1 follow document order. Since 0.1. */
KB_API size_t kb_definition_axis_count(const kb_definition* def);

/* Describes axis `index`.
 *   out (in/out) a kb_axis_info whose struct_size is set; its strings are borrowed from def.
 * Returns KB_OK or KB_ERROR_INVALID_ARGUMENT (NULL argument, index out of range, short
 * struct_size). Thread-safe. Since 0.1. */
KB_API kb_status kb_definition_axis(const kb_definition* def, size_t index, kb_axis_info* out);

/* One input or output tensor of a definition. Since 0.1. */
typedef struct kb_tensor_info {
  size_t struct_size;        /* in: sizeof(kb_tensor_info) */
  const char* name;          /* out: borrowed */
  kb_dtype dtype;            /* out */
  int32_t rank;              /* out: number of dimensions; 0 for a 0-D tensor; -1 for a Python scalar
                                (`"shape": null` in the JSON) */
  const char* const* shape;  /* out: `rank` axis names, borrowed; NULL when rank <= 0 */
  const char* description;   /* out: borrowed, NULL if none */
  int optional;              /* out: 1 when the caller may pass None/NULL for it (`"optional": true`) */
} kb_tensor_info;

#define KB_TENSOR_INFO_INIT {sizeof(kb_tensor_info), NULL, KB_DTYPE_FLOAT32, 0, NULL, NULL, 0}

/* Number of inputs / outputs (0 for a NULL handle). Inputs then outputs, in document order, are the
 * call signature: run(inputs..., outputs...). Since 0.1. */
KB_API size_t kb_definition_input_count(const kb_definition* def);
KB_API size_t kb_definition_output_count(const kb_definition* def);

/* Describes input / output `index`.
 *   out (in/out) a kb_tensor_info whose struct_size is set; its pointers are borrowed from def.
 * Returns KB_OK or KB_ERROR_INVALID_ARGUMENT (NULL argument, index out of range, short
 * struct_size). Thread-safe. Since 0.1. */
KB_API kb_status kb_definition_input(const kb_definition* def, size_t index, kb_tensor_info* out);
KB_API kb_status kb_definition_output(const kb_definition* def, size_t index, kb_tensor_info* out);

/* Number of constraints, and the text of constraint `index` (a Python expression such as
 * "len_indptr == batch_size + 1"). The text is borrowed; NULL (recording a message) for a NULL
 * handle or an index out of range. Since 0.1. */
KB_API size_t kb_definition_constraint_count(const kb_definition* def);
KB_API const char* kb_definition_constraint(const kb_definition* def, size_t index);

/* Number of tags, and tag `index` (e.g. "stage:decode"). Borrowed; NULL (recording a message) for
 * a NULL handle or an index out of range. Since 0.1. */
KB_API size_t kb_definition_tag_count(const kb_definition* def);
KB_API const char* kb_definition_tag(const kb_definition* def, size_t index);

/* What kb_definition_check_tensors() found. Since 0.1. */
typedef struct kb_check_result {
  size_t struct_size;           /* in: sizeof(kb_check_result) */
  int64_t* axis_values;         /* in, nullable: caller's array receiving one value per axis, in
                                   definition axis order (const axes too; -1 for a var axis no tensor
                                   binds). Written only when axis_capacity >= the axis count. */
  size_t axis_capacity;         /* in: number of elements of axis_values */
  size_t constraints_held;      /* out: constraints evaluated and true */
  size_t constraints_unchecked; /* out: constraints kb could not decide (a value lives on the GPU,
                                   a scalar input was passed as NULL, ...) */
  size_t axis_count;            /* out: the definition's axis count (so a caller can size the array) */
} kb_check_result;

#define KB_CHECK_RESULT_INIT {sizeof(kb_check_result), NULL, 0, 0, 0, 0}

/* Checks a call's tensors against a definition's signature, in definition order, and stops at the
 * first problem:
 *   1. counts: n_inputs and n_outputs equal the definition's;
 *   2. for each tensor, inputs then outputs:
 *      - dtype: DLPack code, bits and lanes as kb_dtype_to_dlpack() gives (float4_e2m1 also accepts
 *        lanes 1); bool is {KB_DLPACK_BOOL, 8, 1} only;
 *      - rank: ndim equals the number of axes in the definition's shape;
 *      - const axes: the dimension equals the axis value;
 *      - var axes: every dimension naming the same axis has the same size, across all tensors;
 *      - device_type: one of DLPack's device types (read as an integer: any other value is
 *        refused before it is used);
 *      - device: kDLCPU, kDLCUDA or kDLCUDAHost; CPU and CUDA tensors are not mixed (CUDA host
 *        memory goes with either), and all kDLCUDA tensors are on one device_id;
 *      - layout: strides NULL, or compact row-major (dimensions of size 1 may have any stride);
 *      - data: not NULL when the tensor has elements;
 *      - extent: the product of the dims fits int64, and data + byte_offset + the tensor's size in
 *        bytes does not wrap past the end of the address space.
 *   3. constraints: each is evaluated (Python semantics) over the bound axes, the tensors' shapes,
 *      the values of scalar inputs, and elements of int8/int16/int32/int64/bool tensors in host
 *      memory (kDLCPU, kDLCUDAHost; byte_offset respected). Elements of kDLCUDA tensors are never
 *      read: constraints needing them count as unchecked.
 * A Python-scalar input (rank -1 in kb_tensor_info) is passed as NULL (value unknown: constraints
 * needing it are unchecked) or as a 0-D tensor in host memory holding the value (a float scalar
 * may be float32 or float64, an int scalar any of int8..int64, a bool scalar bool). A tensor
 * marked optional (kb_tensor_info.optional) may be NULL: it binds no axis and constraints over it
 * are unchecked. Every other entry must be non-NULL.
 *   def        (in) the definition.
 *   inputs     (in) n_inputs tensor pointers in definition input order; may be NULL when n_inputs == 0.
 *   outputs    (in) n_outputs tensor pointers in definition output order; may be NULL when n_outputs == 0.
 *   out        (in/out, nullable) a kb_check_result whose struct_size is set; receives the axis
 *              count, the axis values (once every tensor passed step 2, so also when a constraint
 *              fails) and the constraint counts (on failure: those evaluated before the failure).
 * Returns KB_OK when everything holds; KB_ERROR_INVALID_ARGUMENT with a message naming the tensor
 * and dimension, e.g.
 *   gqa_paged_decode_h16_kv2_d128_ps64: input "q": dim 2 is 64 but axis head_dim is const 128
 *   gqa_paged_decode_h16_kv2_d128_ps64: input "v_cache": axis num_pages is 10 here but 12 in input "k_cache" dim 0
 *   gqa_paged_decode_h16_kv2_d128_ps64: constraint "len_indptr == batch_size + 1" violated: 5 == 4 is false (...)
 *   gqa_paged_decode_h16_kv2_d128_ps64: input "k_cache": device.device_type is 99, not a DLPack device type
 *   gqa_paged_decode_h16_kv2_d128_ps64: input "k_cache": byte_offset 18446744073709551607 plus its extent of
 *     98304 bytes overflows the address space past data
 * KB_ERROR_UNSUPPORTED for a DLPack device type other than those above; KB_ERROR_LIMIT for a rank above 16
 * or more than 2^40 elements; KB_ERROR_OUT_OF_MEMORY.
 * Reads tensor metadata and, for constraints, host-memory elements only; never touches device
 * memory and never synchronizes a GPU. Allocates nothing on the success path except what
 * constraints over tensor shapes need. Thread-safe. Since 0.1. */
KB_API kb_status kb_definition_check_tensors(const kb_definition* def,
                                             const DLTensor* const* inputs, size_t n_inputs,
                                             const DLTensor* const* outputs, size_t n_outputs,
                                             kb_check_result* out);

/* ==== Workloads ================================================================================ */

/* A Workload: a uuid, values for a definition's var axes, and how each input is made. Immutable.
 * Since 0.1. */
typedef struct kb_workload kb_workload;

/* Reads a bare Workload object ({"uuid", "axes", "inputs"}) and checks its own rules (uuid not
 * empty, axes non-negative, input kinds well formed).
 *   ctx, json, len: as kb_definition_load().  out (out) owned by the caller until kb_workload_destroy().
 * Returns KB_OK, KB_ERROR_PARSE, KB_ERROR_INVALID_DATA, KB_ERROR_LIMIT, KB_ERROR_INVALID_ARGUMENT or
 * KB_ERROR_OUT_OF_MEMORY. Thread-safe. Since 0.1. */
KB_API kb_status kb_workload_load(kb_context* ctx, const char* json, size_t len, kb_workload** out);

/* Reads the workload of one Trace line, as found in a dataset's workloads/<op_type>/<name>.jsonl
 * ({"definition", "workload", "solution", "evaluation"}; the whole line is checked). The handle
 * remembers the line's definition name (kb_workload_definition()). Statuses as kb_workload_load().
 * Thread-safe. Since 0.1. */
KB_API kb_status kb_workload_load_trace_line(kb_context* ctx, const char* line, size_t len, kb_workload** out);

/* Destroys a workload and every string borrowed from it. NULL does nothing. Since 0.1. */
KB_API void kb_workload_destroy(kb_workload* workload);

/* Its uuid. Borrowed; NULL for a NULL handle. Since 0.1. */
KB_API const char* kb_workload_uuid(const kb_workload* workload);

/* The name of the definition it belongs to when read from a Trace line; NULL for a bare workload
 * (or a NULL handle). Borrowed. Since 0.1. */
KB_API const char* kb_workload_definition(const kb_workload* workload);

/* The workload as one line of canonical JSON (a bare Workload object). Borrowed; NULL for a NULL
 * handle. Since 0.1. */
KB_API const char* kb_workload_json(const kb_workload* workload);

/* Number of bound axes (0 for a NULL handle), and axis `index` in document order.
 *   name  (out, nullable) the axis name, borrowed.
 *   value (out, nullable) its value (>= 0).
 * kb_workload_axis returns KB_OK or KB_ERROR_INVALID_ARGUMENT (NULL workload, index out of range).
 * Since 0.1. */
KB_API size_t kb_workload_axis_count(const kb_workload* workload);
KB_API kb_status kb_workload_axis(const kb_workload* workload, size_t index, const char** name, int64_t* value);

/* How a workload input is made. Values pinned. Since 0.1. */
typedef enum kb_input_kind {
  KB_INPUT_RANDOM = 0,      /* generated (seeded) by the harness */
  KB_INPUT_SCALAR = 1,      /* a literal value */
  KB_INPUT_SAFETENSORS = 2, /* a tensor in a safetensors file of the dataset */
  KB_INPUT_KIND_FORCE_32BIT = 0x7fffffff
} kb_input_kind;

/* JSON kind of a scalar input's value. Values pinned. Since 0.1. */
typedef enum kb_scalar_kind {
  KB_SCALAR_INT = 0,
  KB_SCALAR_FLOAT = 1,
  KB_SCALAR_BOOL = 2,
  KB_SCALAR_KIND_FORCE_32BIT = 0x7fffffff
} kb_scalar_kind;

/* One input of a workload. Since 0.1. */
typedef struct kb_workload_input_info {
  size_t struct_size;         /* in: sizeof(kb_workload_input_info) */
  const char* name;           /* out: borrowed */
  kb_input_kind kind;         /* out */
  kb_scalar_kind scalar_kind; /* out: KB_INPUT_SCALAR only (else KB_SCALAR_INT) */
  int64_t int_value;          /* out: KB_SCALAR_INT value, or 0/1 for KB_SCALAR_BOOL; else 0 */
  double float_value;         /* out: the scalar as a double (any scalar kind); else 0 */
  const char* path;           /* out: KB_INPUT_SAFETENSORS only, relative to the dataset root; else NULL */
  const char* tensor_key;     /* out: KB_INPUT_SAFETENSORS only; else NULL */
} kb_workload_input_info;

#define KB_WORKLOAD_INPUT_INFO_INIT \
  {sizeof(kb_workload_input_info), NULL, KB_INPUT_RANDOM, KB_SCALAR_INT, 0, 0.0, NULL, NULL}

/* Number of inputs (0 for a NULL handle), and input `index` in document order.
 *   out (in/out) a kb_workload_input_info whose struct_size is set; strings borrowed from workload.
 * kb_workload_input returns KB_OK or KB_ERROR_INVALID_ARGUMENT (NULL argument, index out of range,
 * short struct_size). Since 0.1. */
KB_API size_t kb_workload_input_count(const kb_workload* workload);
KB_API kb_status kb_workload_input(const kb_workload* workload, size_t index, kb_workload_input_info* out);

/* Checks a workload against a definition: its axes bind exactly the definition's var axes, its
 * inputs name exactly the definition's inputs, scalar inputs are scalars of a fitting kind, tensor
 * sizes stay within limits, and constraints over the bound axes hold. Safetensors files are not
 * opened. When the workload came from a Trace line, its definition name must be def's.
 * Returns KB_OK; KB_ERROR_INVALID_DATA with the first problem ("workload.axes: constraint ...",
 * plus "(and N more errors)"); KB_ERROR_INVALID_ARGUMENT (NULL argument); KB_ERROR_OUT_OF_MEMORY.
 * Thread-safe. Since 0.1. */
KB_API kb_status kb_workload_check(const kb_workload* workload, const kb_definition* def);

/* ==== Solutions ================================================================================ */

/* A Solution: an implementation of a definition (sources plus a build spec). Immutable. Since 0.1. */
typedef struct kb_solution kb_solution;

/* Reads and checks a Solution object (name, definition, author, spec {language, target_hardware,
 * entry_point "file::symbol", ...}, sources [{path, content}] with safe unique relative paths, the
 * entry file among them). Arguments and statuses as kb_definition_load(); out is released with
 * kb_solution_destroy(). Thread-safe. Since 0.1. */
KB_API kb_status kb_solution_load(kb_context* ctx, const char* json, size_t len, kb_solution** out);

/* As kb_solution_load(), reading the file at `path`; also returns KB_ERROR_IO. Since 0.1. */
KB_API kb_status kb_solution_load_file(kb_context* ctx, const char* path, kb_solution** out);

/* Destroys a solution and every string borrowed from it. NULL does nothing. Since 0.1. */
KB_API void kb_solution_destroy(kb_solution* solution);

/* Fields of the solution, borrowed; NULL for a NULL handle. description is also NULL when absent.
 * language is one of "python", "triton", "cpp", "cuda", "tilelang"; entry_point is "file::symbol".
 * Since 0.1. */
KB_API const char* kb_solution_name(const kb_solution* solution);
KB_API const char* kb_solution_definition(const kb_solution* solution);
KB_API const char* kb_solution_author(const kb_solution* solution);
KB_API const char* kb_solution_description(const kb_solution* solution);
KB_API const char* kb_solution_language(const kb_solution* solution);
KB_API const char* kb_solution_entry_point(const kb_solution* solution);

/* The solution as canonical JSON (2-space indented). Borrowed; NULL for a NULL handle. Since 0.1. */
KB_API const char* kb_solution_json(const kb_solution* solution);

/* One source file of a solution. Since 0.1. */
typedef struct kb_source_info {
  size_t struct_size;  /* in: sizeof(kb_source_info) */
  const char* path;    /* out: borrowed, relative */
  const char* content; /* out: borrowed, NUL-terminated (the text may itself contain NUL bytes) */
  size_t content_size; /* out: bytes of content, without the terminator */
} kb_source_info;

#define KB_SOURCE_INFO_INIT {sizeof(kb_source_info), NULL, NULL, 0}

/* Number of source files (0 for a NULL handle), and source `index` in document order.
 * kb_solution_source returns KB_OK or KB_ERROR_INVALID_ARGUMENT (NULL argument, index out of
 * range, short struct_size). Since 0.1. */
KB_API size_t kb_solution_source_count(const kb_solution* solution);
KB_API kb_status kb_solution_source(const kb_solution* solution, size_t index, kb_source_info* out);

/* ==== Results (Trace records) ================================================================== */

/* One Trace record: which definition, workload and solution, and the evaluation. Immutable.
 * Since 0.1. */
typedef struct kb_result kb_result;

/* Evaluation outcome. Values pinned (FlashInfer-Bench's EvaluationStatus, in its order). Since 0.1. */
typedef enum kb_eval_status {
  KB_EVAL_PASSED = 0,
  KB_EVAL_INCORRECT_SHAPE = 1,
  KB_EVAL_INCORRECT_DTYPE = 2,
  KB_EVAL_INCORRECT_NUMERICAL = 3,
  KB_EVAL_RUNTIME_ERROR = 4,
  KB_EVAL_COMPILE_ERROR = 5,
  KB_EVAL_TIMEOUT = 6,
  KB_EVAL_STATUS_FORCE_32BIT = 0x7fffffff
} kb_eval_status;

/* The FlashInfer Trace spelling of a status ("PASSED", "INCORRECT_NUMERICAL", ...). Returns a
 * static string, or NULL (recording a message) for a value outside the enum. Since 0.1. */
KB_API const char* kb_eval_status_name(kb_eval_status status);

/* Reads and checks one Trace line ({"definition", "workload", "solution", "evaluation"}; workload-
 * only lines have null solution and evaluation). Arguments and statuses as kb_definition_load();
 * out is released with kb_result_destroy(). Thread-safe. Since 0.1. */
KB_API kb_status kb_result_load(kb_context* ctx, const char* json_line, size_t len, kb_result** out);

/* Destroys a result and every string borrowed from it. NULL does nothing. Since 0.1. */
KB_API void kb_result_destroy(kb_result* result);

/* Everything in a result. Strings are borrowed from the result. Since 0.1. */
typedef struct kb_result_info {
  size_t struct_size;          /* in: sizeof(kb_result_info) */
  const char* definition;      /* definition name */
  const char* solution;        /* solution name; NULL for a workload-only record */
  const char* workload_uuid;
  int has_evaluation;          /* 0 for a workload-only record: the fields below are then 0/NULL */
  kb_eval_status status;
  const char* hardware;        /* evaluation.environment.hardware */
  const char* timestamp;       /* ISO 8601 */
  const char* log;
  int has_correctness;         /* PASSED and INCORRECT_NUMERICAL carry correctness */
  double max_relative_error;
  double max_absolute_error;
  int has_performance;         /* PASSED carries performance */
  double latency_ms;
  double reference_latency_ms;
  double speedup_factor;
} kb_result_info;

#define KB_RESULT_INFO_INIT \
  {sizeof(kb_result_info), NULL, NULL, NULL, 0, KB_EVAL_PASSED, NULL, NULL, NULL, 0, 0.0, 0.0, 0, 0.0, 0.0, 0.0}

/* Fills `out` (whose struct_size is set) from the result. Returns KB_OK or
 * KB_ERROR_INVALID_ARGUMENT (NULL argument, short struct_size). Thread-safe. Since 0.1. */
KB_API kb_status kb_result_get(const kb_result* result, kb_result_info* out);

/* The result as one canonical JSONL line (no trailing newline), readable by FlashInfer-Bench.
 * Borrowed; NULL for a NULL handle. Since 0.1. */
KB_API const char* kb_result_json(const kb_result* result);

/* ==== Model-level records: Kernel Calling Records, Benchmark Results, Agent traces ============ */

/* The model-level objects of the FlashInfer schema set. Their loaders report problems as
 * "<origin>:<line>: json.path: message" (origin: the file, or "<memory>"), plus "(and N more
 * errors)"; statuses as kb_definition_load(), with KB_ERROR_IO from the _file variants. Handles
 * are immutable, released by their destroy function (NULL does nothing); strings are borrowed
 * from the handle. Thread-safe. Since 0.1 (ABI version 1, added after its first release). */

/* A Kernel Calling Record: a model (Hugging Face id) on a framework ("SGLang", "vLLM", "MLC-LLM"
 * or "TRT-LLM") and how many times each kernel (a definition name) runs in one step. kb reads
 * and writes these optional fields too: per kernel, `axes` (the var-axis values of the call,
 * what kb_estimate matches recorded workloads against) and `notes`; per record, `step`,
 * `description`, `source` (where the architecture numbers come from), `architecture` (the
 * config values the counts follow from) and `notes`. */
typedef struct kb_calling_record kb_calling_record;

KB_API kb_status kb_calling_record_load(kb_context* ctx, const char* json, size_t len, kb_calling_record** out);
KB_API kb_status kb_calling_record_load_file(kb_context* ctx, const char* path, kb_calling_record** out);
KB_API void kb_calling_record_destroy(kb_calling_record* record);

/* The model id, the framework's spelling ("SGLang", ...), and the record as canonical JSON
 * (2-space indented; reads back to an equal record). Borrowed; NULL for a NULL handle. */
KB_API const char* kb_calling_record_model(const kb_calling_record* record);
KB_API const char* kb_calling_record_framework(const kb_calling_record* record);
KB_API const char* kb_calling_record_json(const kb_calling_record* record);
/* The optional `step` and `source` fields; NULL when absent (or for a NULL handle). Borrowed. */
KB_API const char* kb_calling_record_step(const kb_calling_record* record);
KB_API const char* kb_calling_record_source(const kb_calling_record* record);

/* One entry of `kernels`. Strings and arrays are borrowed from the record. */
typedef struct kb_kernel_call_info {
  size_t struct_size;             /* in: sizeof(kb_kernel_call_info) */
  const char* id;                 /* out: the kernel id (a definition name) */
  int64_t count;                  /* out: calls per step, >= 1 */
  size_t axis_count;              /* out: entries of the two arrays below (0 when no axes are given) */
  const char* const* axis_names;  /* out: var-axis names, document order; NULL when axis_count is 0 */
  const int64_t* axis_values;     /* out: their values; NULL when axis_count is 0 */
  const char* notes;              /* out: NULL when absent */
} kb_kernel_call_info;

#define KB_KERNEL_CALL_INFO_INIT {sizeof(kb_kernel_call_info), NULL, 0, 0, NULL, NULL, NULL}

/* Number of kernels (0 for a NULL handle), and kernel `index` (document order). Returns KB_OK or
 * KB_ERROR_INVALID_ARGUMENT (NULL argument, index out of range, short struct_size). */
KB_API size_t kb_calling_record_kernel_count(const kb_calling_record* record);
KB_API kb_status kb_calling_record_kernel(const kb_calling_record* record, size_t index, kb_kernel_call_info* out);

/* Checks the record against `n_defs` definitions (the array may hold NULLs, skipped): every kernel
 * id names one of them, every axis given is an axis of it (a const axis only with its value).
 * Returns KB_OK, or KB_ERROR_INVALID_DATA with the first problem ("path:13: kernels[1].id: no
 * definition \"x\" among the 3 loaded; did you mean y?", plus "(and N more errors)");
 * KB_ERROR_INVALID_ARGUMENT for a NULL record, or NULL defs with n_defs > 0. */
KB_API kb_status kb_calling_record_check(const kb_calling_record* record, const kb_definition* const* defs,
                                         size_t n_defs);

/* A Benchmark Result: one kernel from one source on one device, compiled or not. */
typedef struct kb_benchmark_result kb_benchmark_result;

KB_API kb_status kb_benchmark_result_load(kb_context* ctx, const char* json, size_t len, kb_benchmark_result** out);
KB_API kb_status kb_benchmark_result_load_file(kb_context* ctx, const char* path, kb_benchmark_result** out);
KB_API void kb_benchmark_result_destroy(kb_benchmark_result* result);
/* Canonical JSON (2-space indented). Borrowed; NULL for a NULL handle. */
KB_API const char* kb_benchmark_result_json(const kb_benchmark_result* result);

typedef struct kb_benchmark_result_info {
  size_t struct_size;         /* in: sizeof(kb_benchmark_result_info) */
  const char* device_name;    /* out: device.name */
  const char* kernel_id;      /* out */
  const char* source;         /* out */
  int compiled;               /* out: 1 or 0 */
  int has_time;               /* out: 1 when `time` is present; time_ms is then set, else 0 */
  double time_ms;
  int has_speedup;
  double speedup;
  int has_max_diff;
  double max_diff;
  const char* compile_error;  /* out: set exactly when compiled is 0 */
} kb_benchmark_result_info;

#define KB_BENCHMARK_RESULT_INFO_INIT {sizeof(kb_benchmark_result_info), NULL, NULL, NULL, 1, 0, 0.0, 0, 0.0, 0, 0.0, NULL}

/* Fills `out` (whose struct_size is set). Returns KB_OK or KB_ERROR_INVALID_ARGUMENT. */
KB_API kb_status kb_benchmark_result_get(const kb_benchmark_result* result, kb_benchmark_result_info* out);

/* An Agent trace: either one conversation object ({model, annotation?, conversation}), read as a
 * trace of one llm_request entry, or a list of entries in order: llm_request (OpenAI messages
 * and response), tool_call, mcp (kept verbatim). */
typedef struct kb_agent_trace kb_agent_trace;

KB_API kb_status kb_agent_trace_load(kb_context* ctx, const char* json, size_t len, kb_agent_trace** out);
KB_API kb_status kb_agent_trace_load_file(kb_context* ctx, const char* path, kb_agent_trace** out);
KB_API void kb_agent_trace_destroy(kb_agent_trace* trace);
/* Canonical JSON in the form it was read in (2-space indented). Borrowed; NULL for a NULL handle. */
KB_API const char* kb_agent_trace_json(const kb_agent_trace* trace);
/* 1 when the trace was a conversation object, 0 when a list of entries (or for a NULL handle). */
KB_API int kb_agent_trace_is_conversation(const kb_agent_trace* trace);

/* Kinds of entries. Values pinned. */
typedef enum kb_agent_entry_kind {
  KB_AGENT_LLM_REQUEST = 0,
  KB_AGENT_TOOL_CALL = 1,
  KB_AGENT_MCP = 2,
  KB_AGENT_ENTRY_KIND_FORCE_32BIT = 0x7fffffff
} kb_agent_entry_kind;

/* One entry. Fields that do not apply to its kind are NULL / 0. Strings borrowed from the trace. */
typedef struct kb_agent_entry_info {
  size_t struct_size;            /* in: sizeof(kb_agent_entry_info) */
  kb_agent_entry_kind kind;      /* out */
  const char* json;              /* out: the entry as one-line JSON (every kind) */
  const char* model;             /* llm_request: the model */
  const char* annotation;        /* llm_request: NULL when absent */
  size_t message_count;          /* llm_request: messages in `conversation` */
  const char* response_json;     /* llm_request: the response as one-line JSON; NULL when absent */
  const char* response_content;  /* llm_request: the first choice's message text; NULL when none */
  const char* finish_reason;     /* llm_request: the first choice's finish_reason; NULL when none */
  const char* tool_name;         /* tool_call */
  const char* arguments_json;    /* tool_call: the arguments object as one-line JSON */
  const char* result;            /* tool_call */
  const char* cli_output;        /* tool_call: NULL when absent */
} kb_agent_entry_info;

#define KB_AGENT_ENTRY_INFO_INIT \
  {sizeof(kb_agent_entry_info), KB_AGENT_LLM_REQUEST, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL}

/* One message of an llm_request's conversation. Strings borrowed from the trace. */
typedef struct kb_agent_message_info {
  size_t struct_size;              /* in: sizeof(kb_agent_message_info) */
  const char* role;                /* out: "system", "user", "assistant" or "tool" */
  const char* content;             /* out: the text; NULL for null content or a list of parts */
  const char* content_parts_json;  /* out: a list of content parts as one-line JSON; NULL otherwise */
  const char* name;                /* out: NULL when absent */
  size_t tool_call_count;          /* out: OpenAI tool calls of an assistant message */
  const char* tool_calls_json;     /* out: them as a one-line JSON list; NULL when there are none */
  const char* tool_call_id;        /* out: a tool message's tool_call_id; NULL when absent */
} kb_agent_message_info;

#define KB_AGENT_MESSAGE_INFO_INIT {sizeof(kb_agent_message_info), NULL, NULL, NULL, NULL, 0, NULL, NULL}

/* Number of entries (0 for a NULL handle); entry `index`; message `message` of entry `entry`
 * (an llm_request). Return KB_OK or KB_ERROR_INVALID_ARGUMENT (NULL argument, index out of range,
 * an entry that is not an llm_request, short struct_size). */
KB_API size_t kb_agent_trace_entry_count(const kb_agent_trace* trace);
KB_API kb_status kb_agent_trace_entry(const kb_agent_trace* trace, size_t index, kb_agent_entry_info* out);
KB_API kb_status kb_agent_trace_message(const kb_agent_trace* trace, size_t entry, size_t message,
                                        kb_agent_message_info* out);

/* An estimate of one model step from a calling record and recorded traces (what `kb estimate`
 * prints). Per kernel of the record: the recorded workload nearest to the call's var-axis values
 * (the dispatch rule: the sum over the call's axes of |log2 call - log2 recorded|; `exact` says
 * whether it is the call's own), the baseline's latency there (the reference_latency_ms the
 * PASSED records carry, their median, or a named baseline solution's latency) and the fastest
 * PASSED solution's (a solution that failed there is out), each times the count; the step totals
 * over the measured kernels, each kernel's share of them, and the estimated step speedup.
 * Kernels without a usable record are kept, with the reason. Immutable. */
typedef struct kb_estimate kb_estimate;

typedef struct kb_estimate_options {
  size_t struct_size;    /* in: sizeof(kb_estimate_options) */
  const char* hardware;  /* NULL: every record, which must then come from one device; else only this device's */
  const char* baseline;  /* NULL: the records' reference latency; else this solution's latency */
} kb_estimate_options;

#define KB_ESTIMATE_OPTIONS_INIT {sizeof(kb_estimate_options), NULL, NULL}

/* Reads every .jsonl under the `n_paths` paths (files, or folders searched recursively) and
 * estimates `record`. `opts` may be NULL (the defaults).
 * Returns KB_OK; KB_ERROR_IO (a path that does not exist or cannot be read); KB_ERROR_PARSE or
 * KB_ERROR_INVALID_DATA (a line that is not a valid Trace: "file:line: json.path: message");
 * KB_ERROR_INVALID_ARGUMENT (NULL argument, n_paths 0, short struct_size, or records from several
 * devices without opts->hardware: the message names them). Thread-safe. */
KB_API kb_status kb_estimate_create(kb_context* ctx, const kb_calling_record* record, const char* const* trace_paths,
                                    size_t n_paths, const kb_estimate_options* opts, kb_estimate** out);
KB_API void kb_estimate_destroy(kb_estimate* estimate);
/* The estimate as JSON (2-space indented): the totals, and per kernel the fields below plus the
 * call's and the matched workload's axes. Borrowed; NULL for a NULL handle. */
KB_API const char* kb_estimate_json(const kb_estimate* estimate);

typedef struct kb_estimate_info {
  size_t struct_size;     /* in: sizeof(kb_estimate_info) */
  const char* hardware;   /* out: the device of the records used; "" when none was used */
  const char* baseline;   /* out: "reference" or the baseline solution */
  size_t records;         /* out: trace records read for the record's kernels */
  size_t kernel_count;    /* out: kernels of the record */
  size_t measured_count;  /* out: of those, the ones with a usable record */
  double baseline_ms;     /* out: the step with the baseline, over the measured kernels */
  double best_ms;         /* out: the step with the best PASSED solutions */
  double speedup;         /* out: baseline_ms / best_ms; 0 when nothing was measured */
} kb_estimate_info;

#define KB_ESTIMATE_INFO_INIT {sizeof(kb_estimate_info), NULL, NULL, 0, 0, 0, 0.0, 0.0, 0.0}

typedef struct kb_kernel_estimate_info {
  size_t struct_size;         /* in: sizeof(kb_kernel_estimate_info) */
  const char* id;             /* out: the kernel id */
  int64_t count;              /* out: calls per step */
  int measured;               /* out: 1 when a usable record was found; the fields below are then set */
  const char* reason;         /* out: why not measured; NULL when measured */
  int exact;                  /* out: 1 when the recorded workload is the call's own */
  double distance;            /* out: the dispatch rule's distance to it */
  double baseline_ms;         /* out: one call */
  const char* best_solution;  /* out: NULL when not measured */
  double best_ms;             /* out: one call */
  double baseline_step_ms;    /* out: count x baseline_ms */
  double best_step_ms;        /* out: count x best_ms */
  double baseline_share;      /* out: of the step's baseline total, 0..1 */
  double best_share;          /* out: of the step's best total, 0..1 */
  double speedup;             /* out: baseline_ms / best_ms */
} kb_kernel_estimate_info;

#define KB_KERNEL_ESTIMATE_INFO_INIT \
  {sizeof(kb_kernel_estimate_info), NULL, 0, 0, NULL, 0, 0.0, 0.0, NULL, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}

/* The totals, and kernel `index` (the record's order). Return KB_OK or KB_ERROR_INVALID_ARGUMENT
 * (NULL argument, index out of range, short struct_size). */
KB_API kb_status kb_estimate_get(const kb_estimate* estimate, kb_estimate_info* out);
KB_API kb_status kb_estimate_kernel(const kb_estimate* estimate, size_t index, kb_kernel_estimate_info* out);

/* ==== Running ================================================================================== */

/* Runs kb's solution `solution` (a name from kb's registry: "reference" is kb's CPU oracle;
 * "kb_cpu_*" run on the CPU, "kb_cuda_*" / "kb_cublaslt_*" on the GPU) on the caller's tensors.
 * The tensors are first checked exactly as kb_definition_check_tensors() does.
 *   ctx        (in) a context.
 *   def        (in) the definition the tensors follow.
 *   solution   (in) the solution's name.
 *   inputs     (in) n_inputs tensors in definition input order (Python scalars: a 0-D host tensor).
 *   outputs    (in) n_outputs tensors in definition output order; the solution writes into them.
 *   stream     (in) a cudaStream_t for GPU solutions (NULL: the default stream); ignored on the CPU.
 * A CPU solution needs every tensor in host memory; kb copies inputs into its own buffers, runs,
 * and copies outputs back before returning. A GPU solution runs on its tensors' CUDA device (their
 * DLPack device_id, one for all), as a PyTorch op does: when that is not the calling thread's
 * current device, kb makes it current for the call and restores the caller's afterwards, so
 * `stream` must belong to the tensors' device. kb launches on `stream` with the caller's memory,
 * allocates nothing and does not synchronize (errors from the kernel itself surface at the
 * caller's next synchronization), except that a gemm plans on its first call: the first gemm on a
 * stream allocates that stream's workspace, and the first call of each shape outside stream capture
 * times cuBLASLt's candidate algorithms (and, for kb_cuda_gemm at M <= 16, kb's gemv plans against
 * cuBLASLt) on the caller's tensors and synchronizes `stream`; run each shape once before timing
 * or capturing it (the tuning settings cublaslt_autotune=0 and gemm_race=0 skip the timing). Once a call of a given shape has run on the calling thread, repeating
 * it allocates no host memory either, with every one of kb's CUDA solutions (tests/gpu/test_hot_path
 * counts: the rmsnorm (plain and fused add), silu_and_mul, rope and gemm solutions, and the GQA and
 * MLA decode and prefill solutions; plugins are not covered).
 * Returns KB_OK; KB_ERROR_INVALID_ARGUMENT (NULL argument, tensors that do not fit the definition);
 * KB_ERROR_NOT_FOUND (no such solution); KB_ERROR_UNSUPPORTED (the solution does not handle this
 * definition, or tensors on the wrong device kind, or a CUDA solution in a build without CUDA);
 * KB_ERROR_CUDA; whatever the solution returns. Thread-safe for distinct outputs. Since 0.1. */
KB_API kb_status kb_solution_run(kb_context* ctx, const kb_definition* def, const char* solution,
                                 const DLTensor* const* inputs, size_t n_inputs,
                                 const DLTensor* const* outputs, size_t n_outputs, void* stream);

/* kb_solution_run() with the seed a random solution draws from: sampling solutions (op_type
 * "sampling") draw the same samples from the same inputs and seed, and independent ones from another
 * seed, so an engine passes a fresh seed each step (kb_solution_run() passes 0: every call with
 * the same inputs then draws the same samples). Other solutions ignore the seed. Since 0.1. */
KB_API kb_status kb_solution_run_seeded(kb_context* ctx, const kb_definition* def, const char* solution,
                                        const DLTensor* const* inputs, size_t n_inputs,
                                        const DLTensor* const* outputs, size_t n_outputs, void* stream,
                                        uint64_t seed);

/* ==== Dispatch ================================================================================= */

/* A per-call choice among kb's solutions of one definition, made from recorded traces: what an
 * engine links kb for. Built once (kb_dispatch_create reads the traces); every call then picks, for
 * its own axis values, the solution that was fastest and PASSED on the nearest recorded workload,
 * and runs it as kb_solution_run() does. Immutable after creation: any number of threads may call
 * kb_dispatch_choose() and kb_dispatch_run() on one kb_dispatch. Since 0.1. */
typedef struct kb_dispatch kb_dispatch;

/* Only a recorded workload with exactly the call's var-axis values counts; otherwise the fallback. */
#define KB_DISPATCH_EXACT 1u

/* Options of kb_dispatch_create(). Since 0.1. */
typedef struct kb_dispatch_options {
  size_t struct_size;   /* sizeof(kb_dispatch_options) */
  const char* hardware; /* nullable: only records whose evaluation.environment.hardware equals this
                           (e.g. "NVIDIA H100 80GB HBM3"); NULL: records from any hardware */
  const char* fallback; /* nullable: the solution for calls no record covers, on its device kind;
                           NULL: kb's default solution of the definition for the tensors' device */
  uint32_t flags;       /* KB_DISPATCH_EXACT, or 0 */
  double tie_margin;    /* since 0.1: on one workload's values, a solution must be
                           faster by more than this fraction than one kb lists before it for the
                           definition (kb bench --list's order, its default first) to win over it,
                           so that timing noise between equivalent solutions (kb_cuda_gemm and
                           kb_cuda_gemv run one kernel at M = 1) does not flip the choice from run
                           to run. 0: the strictly fastest. In [0, 1]; default 0.02, also for
                           callers whose struct_size ends before this field. */
} kb_dispatch_options;

#define KB_DISPATCH_OPTIONS_INIT {sizeof(kb_dispatch_options), NULL, NULL, 0u, 0.02}

/* Builds a dispatch for `def` from the FlashInfer-Bench Trace lines under `traces`: a .jsonl file,
 * or a folder searched recursively for them (`kb bench --out DIR` writes DIR/traces/...).
 * Lines of other definitions are skipped. A record counts when its solution is one of kb's
 * in-process solutions that handles `def` ("kb bench --list"; plugins and the oracle do not count:
 * they do not run in this process). For each workload's var-axis values and device kind (CPU or
 * CUDA) the fastest PASSED solution is kept, within opts->tie_margin of kb's order (records without
 * a latency, from `kb bench --no-time`, are passed over); a solution with any record other than
 * PASSED on those values is out for them.
 *   ctx     (in) a context.
 *   def     (in) the definition; the dispatch keeps its own copy.
 *   traces  (in) a path.
 *   opts    (in, nullable) NULL means KB_DISPATCH_OPTIONS_INIT. Not kept.
 *   out     (out) the dispatch, owned by the caller until kb_dispatch_destroy().
 * Returns KB_OK (also when no record counts: every call then takes the fallback); KB_ERROR_IO
 * (no such path); KB_ERROR_PARSE / KB_ERROR_INVALID_DATA (a line of this definition that is not a
 * valid Trace, or whose workload lacks a var axis: the message names the file and line);
 * KB_ERROR_NOT_FOUND / KB_ERROR_UNSUPPORTED (a fallback that is not kb's, or does not handle
 * `def`); KB_ERROR_INVALID_ARGUMENT (also a tie_margin outside [0, 1]). Thread-safe. Since 0.1. */
KB_API kb_status kb_dispatch_create(kb_context* ctx, const kb_definition* def, const char* traces,
                                    const kb_dispatch_options* opts, kb_dispatch** out);

/* Frees a dispatch. NULL is a no-op. Since 0.1. */
KB_API void kb_dispatch_destroy(kb_dispatch* dispatch);

/* Number of (workload axis values, device kind) entries the traces gave, or 0 for NULL. Since 0.1. */
KB_API size_t kb_dispatch_entry_count(const kb_dispatch* dispatch);

/* What kb_dispatch_choose() picked. Strings are owned by the dispatch. Since 0.1. */
typedef struct kb_dispatch_choice {
  size_t struct_size;          /* in: sizeof(kb_dispatch_choice) */
  const char* solution;        /* out: the solution a run of this call uses */
  const char* workload_uuid;   /* out: the recorded workload it won on; NULL for the fallback */
  double recorded_latency_ms;  /* out: its recorded latency; 0 for the fallback */
  int exact;                   /* out: 1 when that workload has exactly the call's var-axis values */
} kb_dispatch_choice;

#define KB_DISPATCH_CHOICE_INIT {sizeof(kb_dispatch_choice), NULL, NULL, 0.0, 0}

/* The choice for a call, without running it. The tensors are checked as in
 * kb_definition_check_tensors(); the device kind is CUDA when any tensor is kDLCUDA, else CPU.
 * The nearest recorded workload is the one whose var-axis values differ least, summed over the var
 * axes as |log2(a) - log2(b)| (batch 1 against 2 weighs as 1024 against 2048); ties go to the
 * smaller values. Returns KB_OK; the checks' errors; KB_ERROR_UNSUPPORTED when nothing was
 * recorded for this device kind and kb has no solution of the definition for it;
 * KB_ERROR_INVALID_ARGUMENT. Touches no device memory; allocates nothing beyond what
 * kb_definition_check_tensors() needs for constraints over tensor shapes. Since 0.1. */
KB_API kb_status kb_dispatch_choose(const kb_dispatch* dispatch, const DLTensor* const* inputs, size_t n_inputs,
                                    const DLTensor* const* outputs, size_t n_outputs, kb_dispatch_choice* out);

/* Runs the call on the solution kb_dispatch_choose() picks, with kb_solution_run()'s contract: the
 * tensors' device, `stream`, no device allocation and no synchronization (and, once the shape has
 * run on this thread, no host allocation for the solutions kb_solution_run() names), so it may be captured in a CUDA graph once each shape
 * has run outside capture (a gemm sets up its stream's workspace on
 * its first call and refuses that under capture, with its reason). On the CPU path kb copies the
 * tensors through host buffers as kb_solution_run() does. Returns kb_dispatch_choose()'s and
 * kb_solution_run()'s statuses. Since 0.1. */
KB_API kb_status kb_dispatch_run(const kb_dispatch* dispatch, const DLTensor* const* inputs, size_t n_inputs,
                                 const DLTensor* const* outputs, size_t n_outputs, void* stream);

/* Options of kb_benchmark_run(). Since 0.1. */
typedef struct kb_benchmark_options {
  size_t struct_size;          /* in: sizeof(kb_benchmark_options) */
  int trials;                  /* correctness trials, fresh seeded inputs each (default 3) */
  uint64_t seed;               /* trial t uses seed + t (default 27490) */
  int time;                    /* nonzero: time the solution after it passes (default 1) */
  const char* dataset_root;    /* nullable: resolves safetensors inputs of the workload */
  double atol;                 /* tolerances; a negative value keeps kb's policy (1e-2, 1e-2, 1.0; */
  double rtol;                 /*   0.95 matched ratio for low-bit definitions: moe_fp8_block_scale*,
                                *   fp8/fp4 inputs or a quantization:float8_*|float4_* tag) */
  double required_matched_ratio;
  /* Added after version 1 of this struct: a caller whose struct_size ends before a field gets
   * that field's default. */
  int cupti;                   /* CUDA solutions: also time the kernels alone from CUPTI's records
                                * (the trace's evaluation.performance.extra gains cupti_kernel_ms,
                                * or `cupti` with the reason it could not record) (default 0).
                                * A plugin's CUDA solutions are timed so in kb-worker. */
} kb_benchmark_options;

#define KB_BENCHMARK_OPTIONS_INIT {sizeof(kb_benchmark_options), 3, 27490, 1, NULL, -1.0, -1.0, -1.0, 0}

/* Runs one workload through kb's harness with solution `solution`: inputs materialized from the
 * workload (seeded), the solution judged against kb's oracle over `trials` trials with outputs
 * poisoned, inputs and guard bytes checked, then timed (CPU: steady clock; GPU: CUDA events, L2
 * flushed and left clean, or as the environment's KB_L2_FLUSH=write|clean says), GPU solutions on the calling thread's current CUDA device (its copy bandwidth and
 * tensor-core rate measured once per device). The evaluation comes back as a result (a Trace
 * record) whose status may be any kb_eval_status; a failing solution is not an error of this call.
 *   opts (in, nullable) options; NULL means KB_BENCHMARK_OPTIONS_INIT.
 *   out  (out) owned by the caller until kb_result_destroy().
 * Returns KB_OK; KB_ERROR_INVALID_ARGUMENT (NULL argument, short struct_size, the workload does
 * not fit the definition); KB_ERROR_NOT_FOUND (no such solution); KB_ERROR_UNSUPPORTED (no oracle
 * for the definition, or the solution does not handle it). Thread-safe. Since 0.1. */
KB_API kb_status kb_benchmark_run(kb_context* ctx, const kb_definition* def, const kb_workload* workload,
                                  const char* solution, const kb_benchmark_options* opts, kb_result** out);

/* ==== Plugins: outside solutions ================================================================ */
/*
 * Outside solutions are code kb did not write: shared libraries ("plugins") and FlashInfer-Bench
 * Solution JSON whose C++/CUDA sources kb builds into one. kb never runs such code in the calling
 * process. kb_plugin_load() starts a worker process (the kb-worker executable) that dlopens the
 * library, calls its entry point and sends the table of solutions back; every call of a solution
 * runs in that worker on tensors in shared memory, with guard bytes around every buffer, watched
 * by a time limit. A crash is reported with its signal, a hang is killed after the limit, and the
 * worker is replaced before the next call; the solution's stdout/stderr go into the evaluation log.
 *
 * WRITING A PLUGIN (since 0.1; plugin ABI version 1)
 *   Export one function, with C linkage and default visibility:
 *
 *     KB_PLUGIN_EXPORT const kb_plugin_table* kb_plugin_entry_v1(uint32_t kb_plugin_abi);
 *
 *   kb passes KB_PLUGIN_ABI_VERSION of the kb that loads it. Return a pointer to a table that stays
 *   valid while the library is loaded (static storage), whose abi_version is the
 *   KB_PLUGIN_ABI_VERSION the plugin was compiled with, or NULL to refuse. kb refuses a table of
 *   another ABI version, a NULL table, a missing entry symbol, and a malformed table (struct_size
 *   too small, no solutions, NULL or empty strings, names that are not [A-Za-z0-9_.-]+ of at most
 *   128 bytes, duplicate names, an unknown device, a NULL run function), naming the library and
 *   the solution.
 *
 *   Each solution's run function is called with the definition's inputs and outputs in definition
 *   order (the signature: inputs then outputs, as in the definition JSON). Tensors are DLPack
 *   views: compact row-major, strides never NULL, in host memory for KB_PLUGIN_DEVICE_CPU and in
 *   device memory of the current CUDA device for KB_PLUGIN_DEVICE_CUDA. Python scalars (shape null)
 *   arrive as tagged values (kb_plugin_arg). Outputs are allocated by kb with the definition's
 *   shapes and poisoned; write every element and nothing else. Inputs are read-only. A CUDA
 *   solution launches on call->stream and need not synchronize. Return KB_PLUGIN_OK; or
 *   KB_PLUGIN_ERROR with a one-line message written into call->message (at most message_size
 *   bytes, NUL-terminated), recorded as RUNTIME_ERROR; or KB_PLUGIN_UNSUPPORTED when the solution
 *   does not handle these shapes (the evaluation is then skipped, not failed).
 *   A run function may be called many times, with fresh inputs each time: never keep results.
 *
 * SOLUTION JSON (language "cpp" or "cuda")
 *   kb writes the sources to a cache directory keyed by a hash of the solution's content and builds
 *   them (the C++ compiler, or nvcc for "cuda") into a plugin. spec.entry_point "file::symbol" names
 *   a function called with destination passing: positional, inputs then outputs in definition order;
 *   tensor parameters are `DLTensor*` (or `const DLTensor*`), Python scalars are plain arithmetic
 *   parameters (int64_t, int, double, float or bool); a CUDA solution may take one more, trailing
 *   pointer parameter that receives the cudaStream_t. It returns void, or int (0 = success). kb
 *   checks the parameter list against the definition when it builds, so a mismatch is a
 *   COMPILE_ERROR naming the parameter. python, triton and tilelang solutions are reported as
 *   languages kb cannot run.
 */

/* Plugin ABI version of this header. Since 0.1. */
#define KB_PLUGIN_ABI_VERSION 1
/* The entry point's name, for dlsym. Since 0.1. */
#define KB_PLUGIN_ENTRY_SYMBOL "kb_plugin_entry_v1"

#if defined(__GNUC__) || defined(__clang__)
#define KB_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define KB_PLUGIN_EXPORT
#endif

/* Where a plugin solution runs. Values pinned. Since 0.1. */
typedef enum kb_plugin_device {
  KB_PLUGIN_DEVICE_CPU = 0,
  KB_PLUGIN_DEVICE_CUDA = 1,
  KB_PLUGIN_DEVICE_FORCE_32BIT = 0x7fffffff
} kb_plugin_device;

/* What a plugin's run function returns. Values pinned. Since 0.1. */
typedef enum kb_plugin_status {
  KB_PLUGIN_OK = 0,
  KB_PLUGIN_ERROR = 1,       /* failed; call->message says why (RUNTIME_ERROR) */
  KB_PLUGIN_UNSUPPORTED = 2, /* does not handle these shapes; the evaluation is skipped */
  KB_PLUGIN_STATUS_FORCE_32BIT = 0x7fffffff
} kb_plugin_status;

/* Kinds of arguments. Values pinned. Since 0.1. */
typedef enum kb_arg_kind {
  KB_ARG_TENSOR = 0,
  KB_ARG_INT = 1,   /* a Python int scalar: int_value */
  KB_ARG_FLOAT = 2, /* a Python float scalar: float_value */
  KB_ARG_BOOL = 3,  /* a Python bool scalar: int_value 0 or 1 */
  KB_ARG_KIND_FORCE_32BIT = 0x7fffffff
} kb_arg_kind;

/* One input of a call: a tensor or a tagged scalar. Since 0.1. */
typedef struct kb_plugin_arg {
  kb_arg_kind kind;
  const DLTensor* tensor; /* KB_ARG_TENSOR: the input (read-only); NULL otherwise */
  int64_t int_value;      /* KB_ARG_INT, KB_ARG_BOOL */
  double float_value;     /* KB_ARG_FLOAT (also set, converted, for INT and BOOL) */
} kb_plugin_arg;

/* One call of a plugin solution. Everything is borrowed for the duration of the call. Since 0.1. */
typedef struct kb_plugin_call {
  size_t struct_size;       /* sizeof(kb_plugin_call) of the kb that calls */
  const char* definition;   /* the definition's name */
  const kb_plugin_arg* inputs;
  size_t n_inputs;          /* the definition's inputs, in order */
  const DLTensor* outputs;  /* write into outputs[i].data */
  size_t n_outputs;         /* the definition's outputs, in order */
  void* stream;             /* cudaStream_t for KB_PLUGIN_DEVICE_CUDA; NULL on the CPU */
  void* user_data;          /* the solution's user_data */
  char* message;            /* for KB_PLUGIN_ERROR / KB_PLUGIN_UNSUPPORTED: one line, NUL-terminated */
  size_t message_size;      /* bytes available in message (at least 256) */
} kb_plugin_call;

typedef kb_plugin_status (*kb_plugin_run_fn)(const kb_plugin_call* call);

/* One solution of a plugin. Strings are UTF-8, owned by the plugin. Since 0.1. */
typedef struct kb_plugin_solution {
  size_t struct_size;      /* sizeof(kb_plugin_solution) */
  const char* definition;  /* the definition it implements, e.g. "rmsnorm_h4096" */
  const char* name;        /* solution name in traces, unique in the plugin */
  const char* author;      /* traces/<author>/... */
  const char* description; /* nullable */
  kb_plugin_device device;
  kb_plugin_run_fn run;
  void* user_data;         /* passed back in kb_plugin_call.user_data */
} kb_plugin_solution;

/* What the entry point returns. Since 0.1. */
typedef struct kb_plugin_table {
  size_t struct_size;                  /* sizeof(kb_plugin_table) */
  uint32_t abi_version;                /* KB_PLUGIN_ABI_VERSION the plugin was built with */
  uint32_t n_solutions;                /* 1..4096 */
  const kb_plugin_solution* solutions; /* n_solutions entries */
} kb_plugin_table;

/* The entry point every plugin exports (declared here so a plugin's definition is checked). */
typedef const kb_plugin_table* (*kb_plugin_entry_v1_fn)(uint32_t kb_plugin_abi);
KB_PLUGIN_EXPORT const kb_plugin_table* kb_plugin_entry_v1(uint32_t kb_plugin_abi);

/* A loaded plugin (or a built Solution JSON) and its worker process. Unlike the other handles it
 * has state (the worker): calls on one kb_plugin are serialized internally. Since 0.1. */
typedef struct kb_plugin kb_plugin;

/* Options of kb_plugin_load() and kb_plugin_load_solution(). Since 0.1. */
typedef struct kb_plugin_options {
  size_t struct_size;      /* sizeof(kb_plugin_options) */
  double timeout_s;        /* limit on one call (and on loading); <= 0: 30 seconds */
  const char* worker_path; /* nullable: the kb-worker executable; NULL: $KB_WORKER, else the one built
                              or installed with this libkb */
  const char* cache_dir;   /* nullable: where Solution JSON builds go; NULL: $KB_CACHE_DIR, else
                              $XDG_CACHE_HOME/kb, else ~/.cache/kb */
  uint32_t flags;          /* reserved: must be 0 */
} kb_plugin_options;

#define KB_PLUGIN_OPTIONS_INIT {sizeof(kb_plugin_options), 0.0, NULL, NULL, 0u}

/* Loads the plugin at `path` in a new worker process and reads its table.
 *   opts (in, nullable) NULL means KB_PLUGIN_OPTIONS_INIT. Not kept.
 *   out  (out) the plugin, owned by the caller until kb_plugin_destroy().
 * Returns KB_OK; KB_ERROR_IO (no such file, kb-worker not found or not started); KB_ERROR_NOT_FOUND
 * (the library has no kb_plugin_entry_v1, or cannot be dlopened: the message has dlerror's text);
 * KB_ERROR_ABI_MISMATCH (the table's abi_version is not KB_PLUGIN_ABI_VERSION, or the entry point
 * returned NULL); KB_ERROR_INVALID_DATA (a malformed table; the worker crashed or hung while
 * loading); KB_ERROR_INVALID_ARGUMENT. Messages begin with the path. The worker runs the
 * plugin's CUDA solutions on the CUDA device current on the calling thread at this call (kb checks
 * it did, and traces record the device's ordinal and PCI bus id). Thread-safe. Since 0.1. */
KB_API kb_status kb_plugin_load(kb_context* ctx, const char* path, const kb_plugin_options* opts, kb_plugin** out);

/* Builds a Solution (language "cpp" or "cuda") of definition `def` into a plugin under the cache
 * directory, or reuses an earlier build of the same content, and loads it as kb_plugin_load() does.
 * `def` gives the calling convention (its inputs then outputs) that the build checks the entry
 * point against. A build that fails is not an error of this call: the plugin then has the
 * solution's one entry (build_failed 1), and every kb_plugin_benchmark_run() of it records
 * COMPILE_ERROR with the compiler's output in the log.
 * Returns KB_OK; KB_ERROR_UNSUPPORTED (language python, triton or tilelang; cuda in a build of kb
 * without CUDA); KB_ERROR_INVALID_DATA (the solution implements another definition); KB_ERROR_IO
 * (the cache cannot be written); the statuses of kb_plugin_load() for a library that built.
 * Since 0.1. */
KB_API kb_status kb_plugin_load_solution(kb_context* ctx, const kb_solution* solution, const kb_definition* def,
                                         const kb_plugin_options* opts, kb_plugin** out);

/* Stops the worker and destroys the plugin. NULL does nothing. Since 0.1. */
KB_API void kb_plugin_destroy(kb_plugin* plugin);

/* One solution of a loaded plugin. Strings are borrowed from the plugin. Since 0.1. */
typedef struct kb_plugin_solution_info {
  size_t struct_size; /* in: sizeof(kb_plugin_solution_info) */
  const char* definition;
  const char* name;
  const char* author;
  const char* description; /* NULL when absent */
  kb_plugin_device device;
  int build_failed;        /* 1 for a Solution JSON that did not build (its runs are COMPILE_ERROR) */
} kb_plugin_solution_info;

#define KB_PLUGIN_SOLUTION_INFO_INIT {sizeof(kb_plugin_solution_info), NULL, NULL, NULL, NULL, KB_PLUGIN_DEVICE_CPU, 0}

/* Number of solutions (0 for NULL), and solution `index` in table order. kb_plugin_solution_get
 * returns KB_OK or KB_ERROR_INVALID_ARGUMENT (NULL argument, index out of range, short
 * struct_size). Since 0.1. */
KB_API size_t kb_plugin_solution_count(const kb_plugin* plugin);
KB_API kb_status kb_plugin_solution_get(const kb_plugin* plugin, size_t index, kb_plugin_solution_info* out);

/* As kb_benchmark_run(), for the plugin solution named `solution`: the harness materializes and
 * judges in the calling process; the solution runs in the worker. Its crash is RUNTIME_ERROR
 * naming the signal, a call longer than the time limit is TIMEOUT (the worker is killed and
 * replaced), writes past an output or into an input are RUNTIME_ERROR; output from the solution
 * is appended to the log (at most 16 KiB). Returns the statuses of kb_benchmark_run() (NOT_FOUND:
 * no such solution in the plugin; UNSUPPORTED: the solution implements another definition, or
 * declined the shapes); the evaluation's own status is in the result. Since 0.1. */
KB_API kb_status kb_plugin_benchmark_run(kb_context* ctx, kb_plugin* plugin, const char* solution,
                                         const kb_definition* def, const kb_workload* workload,
                                         const kb_benchmark_options* opts, kb_result** out);

/* ==== CUDA ===================================================================================== */

/* Number of usable CUDA devices.
 *   out (out) the count (>= 1) on success; 0 on failure.
 * Returns KB_OK; KB_ERROR_NO_CUDA_DEVICE when kb was built with CUDA but the machine has no usable
 * driver or GPU (kb_last_error() gives the CUDA runtime's reason); KB_ERROR_UNSUPPORTED when kb was
 * built without CUDA; KB_ERROR_INVALID_ARGUMENT (NULL out). Never crashes on a machine without a
 * GPU. Thread-safe. Since 0.1. */
KB_API kb_status kb_cuda_device_count(int* out);

/* Properties of one CUDA device. Since 0.1. */
typedef struct kb_cuda_device_info {
  size_t struct_size;   /* in: sizeof(kb_cuda_device_info) */
  char name[256];       /* out: NUL-terminated, e.g. "NVIDIA H100 80GB HBM3" */
  int sm_count;         /* out: streaming multiprocessors */
  int compute_major;    /* out: compute capability, e.g. 9 and 0 */
  int compute_minor;
  uint64_t memory_bytes; /* out: global memory */
  uint64_t l2_bytes;     /* out: L2 cache */
  char pci_bus_id[32];   /* out: NUL-terminated, e.g. "0000:19:00.0": the physical GPU behind the ordinal,
                            whatever CUDA_VISIBLE_DEVICES makes of ordinals (nvidia-smi and NVML use it).
                            Written when struct_size reaches it: a caller built before it existed passes
                            a struct_size ending at l2_bytes and gets the rest. */
} kb_cuda_device_info;

#define KB_CUDA_DEVICE_INFO_INIT {sizeof(kb_cuda_device_info), {0}, 0, 0, 0, 0, 0, {0}}

/* Describes device `ordinal` (0..count-1).
 *   out (in/out) a kb_cuda_device_info whose struct_size is set (at least up to l2_bytes).
 * Returns KB_OK; KB_ERROR_INVALID_ARGUMENT (NULL out, short struct_size, ordinal out of range);
 * KB_ERROR_NO_CUDA_DEVICE; KB_ERROR_UNSUPPORTED (built without CUDA); KB_ERROR_CUDA.
 * Thread-safe. Since 0.1. */
KB_API kb_status kb_cuda_device_get(int ordinal, kb_cuda_device_info* out);

/* Where kb_cuda_gemm keeps the winners of its races across processes (the gemv plans or cuBLASLt at
 * M <= 16, the long-K forms; docs/performance/gemm.md): sets the process defaults' gemm_race_file
 * (kb_context_options.tuning), which contexts without a tuning string follow from their next call.
 *   path (in, nullable) a JSON-lines file, created when the first race is kept; copied. NULL or "" keeps
 *        no file (races are still cached in the process).
 * A problem's first call in the process looks for its line there (a line counts only for the GPU model,
 * SM count, CUDA and cuBLASLt versions and kb version it names) and takes the winner without racing,
 * also under stream capture; else it races and appends the winner. A bad line in the file is the error
 * of that call (kb_solution_run, kb_dispatch_run, ...: KB_ERROR_INVALID_DATA or KB_ERROR_PARSE),
 * naming the file and line. Problems already cached in the process are not looked up again.
 * Returns KB_OK (also in builds without CUDA, where nothing races). Thread-safe; a race already
 * running keeps the file it started with. Since 0.1. */
KB_API kb_status kb_gemm_race_file_set(const char* path);

/* ==== Benchmark a dataset ====================================================================== */

/* What `kb bench` does, for an engine's build system or a script: every selected definition of a
 * dataset, each of its workloads, each solution that handles it on the chosen device (kb's own, the
 * plugins', and the dataset's Solution JSON in cpp or cuda, built into the cache), judged as
 * kb_benchmark_run() judges one, timed, and appended as one Trace line to
 * out_dir/traces/<author>/<op_type>/<definition>.jsonl (written whole and fsync'ed before the next
 * evaluation starts, so an interrupted run loses nothing already measured). Outside solutions run in
 * worker processes as with kb_plugin_load(). Since 0.1. */

/* Where expected outputs come from. Values pinned. Since 0.1. */
typedef enum kb_bench_reference {
  KB_BENCH_REFERENCE_NATIVE = 0, /* kb's oracles */
  KB_BENCH_REFERENCE_TORCH = 1,  /* each definition's PyTorch `reference`, run by python3 on the CPU ($KB_PYTHON
                                    names another interpreter; it needs torch). Definitions without a kb
                                    oracle become evaluable, and kb's oracle is judged too, as the solution
                                    "reference". Sampling is always judged by distribution against kb's oracle. */
  KB_BENCH_REFERENCE_FORCE_32BIT = 0x7fffffff
} kb_bench_reference;

/* Options of kb_bench_run(). Strings are read during the call only. Since 0.1. */
typedef struct kb_bench_options {
  size_t struct_size;        /* sizeof(kb_bench_options) */
  const char* dataset;       /* a FlashInfer-Bench dataset directory (definitions/, workloads/, solutions/,
                                blob/), or any folder of definitions and workload files, searched
                                recursively. Required. */
  const char* out_dir;       /* where traces go (created as needed). Required. */
  const char* definitions;   /* nullable: comma-separated definition names; NULL or "": every definition.
                                A name the dataset does not hold is KB_ERROR_NOT_FOUND. */
  const char* solutions;     /* nullable: comma-separated solution names; NULL or "": every solution that
                                handles a selected definition */
  const char* device;        /* nullable: "cpu"; "cuda" (the calling thread's current device); "cuda:N"
                                (device N, numbered as CUDA_VISIBLE_DEVICES leaves them). NULL: "cuda" when
                                a CUDA device is usable, else "cpu". Solutions of the other kind are
                                skipped. */
  int trials;                /* correctness trials per workload, fresh seeded inputs each; >= 1 (default 3) */
  uint64_t seed;             /* trial t uses seed + t (default 27490) */
  int time;                  /* nonzero: time each solution that passes (default 1) */
  int cupti;                 /* nonzero: CUDA solutions are also timed from CUPTI's kernel records, as in
                                kb_benchmark_options (default 0) */
  int resume;                /* nonzero: leave out (definition, workload, solution) already recorded under
                                out_dir, so an interrupted run continues where it stopped (default 0) */
  size_t max_workloads;      /* at most this many workloads per definition, the smallest first (by input
                                elements); 0: all (default 0) */
  uint32_t shard_index;      /* with shard_count > 1: only the shard_index-th (1-based) of shard_count
                                slices of the selected definitions (their names sorted, every
                                shard_count-th from the shard_index-th), so that shard_count processes
                                cover a dataset between them without writing the same trace file */
  uint32_t shard_count;      /* 0 or 1: no sharding (default 1) */
  kb_bench_reference reference; /* default KB_BENCH_REFERENCE_NATIVE */
  int sampling_draws;        /* sampling definitions: calls per trial (the TVD threshold follows from it);
                                0: 1000 (default 0) */
  const char* tolerances;    /* nullable: a tolerance config file (default, op_type and definition
                                sections) over kb's policy */
  double atol;               /* applied on top of everything; negative: as the policy says (default -1) */
  double rtol;
  double required_matched_ratio;
  const char* const* plugins; /* nullable when n_plugins is 0: paths of plugin libraries
                                 (kb_plugin_entry_v1) whose solutions are judged too */
  size_t n_plugins;
  const kb_plugin_options* plugin_options; /* nullable: timeout, worker and build cache of outside solutions
                                              (plugins and Solution JSON); NULL: KB_PLUGIN_OPTIONS_INIT */
  uint32_t flags;            /* reserved: must be 0 */
  const char* baseline;      /* nullable: what the speedup divides by, recorded in each trace: NULL, "" or
                                "reference" (the reference's own time where the run times it: the CPU),
                                "none", "torch" (the definition's PyTorch reference timed on the run's
                                device: python3 with torch needed), or a selected solution's name (its latency at the same workload
                                where it PASSED; it runs first on each definition). An unknown name is
                                KB_ERROR_NOT_FOUND. Since 0.2; read only when struct_size reaches it. */
} kb_bench_options;

#define KB_BENCH_OPTIONS_INIT                                                                                \
  {sizeof(kb_bench_options), NULL, NULL, NULL, NULL, NULL, 3, 27490, 1, 0, 0, 0, 1, 1,                       \
   KB_BENCH_REFERENCE_NATIVE, 0, NULL, -1.0, -1.0, -1.0, NULL, 0, NULL, 0u, NULL}

/* What a run reports as it goes. Values pinned. Since 0.1. */
typedef enum kb_bench_event_kind {
  KB_BENCH_EVENT_STARTED = 0,   /* an evaluation starts: definition, solution, workload_uuid, index, total */
  KB_BENCH_EVENT_EVALUATED = 1, /* it ended: result holds the Trace record, already in its trace file (its
                                   status may be any kb_eval_status); definition ... total as for STARTED */
  KB_BENCH_EVENT_SKIPPED = 2,   /* message: something not evaluated, and why: a definition without an
                                   oracle or without workloads, a solution for the other device kind, a
                                   solution that declined a workload's shapes, Solution JSON in a language
                                   kb cannot run */
  KB_BENCH_EVENT_PROBLEM = 3,   /* message: something left out because it is broken: a dataset file that
                                   breaks the format ("file:line: json.path: what"), an outside solution that
                                   cannot be used (a duplicate name, a build that cannot start), a workload
                                   that cannot be evaluated (definition, solution and workload_uuid say
                                   which). The run goes on; the summary counts it */
  KB_BENCH_EVENT_KIND_FORCE_32BIT = 0x7fffffff
} kb_bench_event_kind;

/* One event. Everything it points to is borrowed for the duration of the callback. Later versions
 * may append fields: struct_size is the size of the struct kb passes. Since 0.1. */
typedef struct kb_bench_event {
  size_t struct_size;         /* sizeof(kb_bench_event) of the libkb that calls */
  kb_bench_event_kind kind;
  const kb_result* result;    /* EVALUATED: read it with kb_result_get() / kb_result_json(); else NULL.
                                 Borrowed: to keep it, kb_result_load() its kb_result_json() line,
                                 which gives an owned copy. */
  const char* message;        /* SKIPPED, PROBLEM: one line; else NULL */
  const char* definition;     /* STARTED, EVALUATED, and PROBLEM about one evaluation; else NULL */
  const char* solution;       /* as definition */
  const char* workload_uuid;  /* as definition */
  size_t index;               /* STARTED, EVALUATED: 0-based position among `total` evaluations */
  size_t total;               /* the evaluations of the run (what resume leaves out is not counted) */
} kb_bench_event;

/* The callback of kb_bench_run(): called on the thread that called kb_bench_run(), one event at a
 * time, in order. It may call any kb function (kb_result_get(), kb_result_json(), ...). It must
 * return normally: no longjmp, and from C++ no exception (one is caught and ends the run with
 * KB_ERROR_INTERNAL). `user` is kb_bench_run()'s argument. Since 0.1. */
typedef void (*kb_bench_event_fn)(void* user, const kb_bench_event* event);

/* What a run did. Since 0.1. */
typedef struct kb_bench_summary {
  size_t struct_size;       /* in: sizeof(kb_bench_summary) */
  size_t evaluations;       /* out: evaluations the run planned (STARTED events) */
  size_t passed;            /* out: EVALUATED with KB_EVAL_PASSED */
  size_t failed;            /* out: EVALUATED with any other status */
  size_t errors;            /* out: workloads that could not be evaluated (PROBLEM events) */
  size_t skipped;           /* out: SKIPPED events */
  size_t already_recorded;  /* out: evaluations resume left out */
  size_t problems;          /* out: PROBLEM events about the dataset or outside solutions */
  int cuda;                 /* out: 1 when solutions ran on a CUDA device, 0 on the CPU */
} kb_bench_summary;

#define KB_BENCH_SUMMARY_INIT {sizeof(kb_bench_summary), 0, 0, 0, 0, 0, 0, 0, 0}

/* Runs a dataset as `kb bench` does (the command is built on the same code).
 *   ctx      (in) a context.
 *   opts     (in) the run; dataset and out_dir are required. Not kept.
 *   on_event (in, nullable) called for each event; NULL: none are reported.
 *   user     (in, nullable) passed to on_event unchanged.
 *   out      (out, nullable) a kb_bench_summary whose struct_size the caller set, filled when the run
 *            completes; unchanged otherwise.
 * Every evaluation passed when out->failed, out->errors and out->problems are all 0. With "cuda:N" the
 * run makes device N current on the calling thread and restores the caller's device before it returns.
 * GPU timing flushes the L2 and leaves it clean, or as the environment's KB_L2_FLUSH=write|clean says.
 * Returns KB_OK when the run completed, whatever the evaluations' statuses; otherwise the error that
 * stopped it (evaluations already recorded stay in their files): KB_ERROR_INVALID_ARGUMENT (NULL ctx or
 * opts, NULL dataset or out_dir, short struct_size, nonzero flags, trials < 1, a shard_index outside
 * 1..shard_count, sampling_draws too few for the TVD test, a device that is not "cpu", "cuda" or
 * "cuda:N", an ordinal past the last device, n_plugins > 0 with NULL plugins); KB_ERROR_NOT_FOUND (a
 * definition name the dataset does not hold); KB_ERROR_NO_CUDA_DEVICE or KB_ERROR_UNSUPPORTED (a CUDA
 * device asked for, none usable or kb built without CUDA); the statuses of kb_plugin_load() for a plugin
 * that does not load; KB_ERROR_IO, KB_ERROR_PARSE or KB_ERROR_INVALID_DATA for a tolerance file that
 * cannot be used; the torch reference's status when python3 or torch cannot start; KB_ERROR_IO when a
 * trace file cannot be read (resume) or written. Messages name the option ("kb_bench_run:
 * opts->device \"cuda:7\": ..."). Thread-safe; runs in parallel that share an out_dir should be shards
 * of one selection (as kb bench processes are), and runs timed on one GPU disturb each other's times.
 * Since 0.1. */
KB_API kb_status kb_bench_run(kb_context* ctx, const kb_bench_options* opts, kb_bench_event_fn on_event, void* user,
                              kb_bench_summary* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KB_KB_H */
