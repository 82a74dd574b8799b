// PyTorch eager as the reference for BackendBench lines (`kb backendbench run
// --reference torch`), as BackendBench judges: the line's ATen overload run
// by PyTorch on the same input values kb's oracle gets.
//
// kb writes a batch of lines to a fresh temporary directory (per line: the
// overload, the argument text, and every input tensor's dtype, shape,
// strides, offset and storage bytes, in the order materialize_call fills
// them) and runs an embedded runner script once per batch in a `python3`
// subprocess ($KB_PYTHON, the tuning setting `python`). The runner rebuilds
// each tensor with torch.frombuffer + as_strided (exact strides and
// overlaps), evaluates the argument text with T(...) taking the next tensor,
// runs the overload on the CPU (device arguments become 'cpu'), and writes
// the outputs (a tensor, or the tensors of a tuple/list, None kept) back as
// contiguous bytes.
//
// Precision: floating inputs (and floating dtype arguments) are raised to
// f64 (complex ones to c128) and each output cast back to the dtype PyTorch gives the line as
// traced (learned from the same call on the meta device, or from a run in
// the line's own dtypes when meta has no kernel for it); where f64 fails the
// line runs in its own dtypes. Every failure of a line is that line's error,
// with the Python exception; python3 or torch missing is the batch's error.
//
// A sparse COO output is written as its parts (_indices(), _values()), what
// torch.testing.assert_close compares for two sparse tensors. _cudnn_rnn and
// _cudnn_rnn_backward (cuDNN only) run, where cuDNN is not at hand, as the
// LSTM they are: aten.lstm and autograd on the same inputs, with the outputs
// kb's oracle defines (kernels/aten/rnn/lstm.cpp: reserve and weight_buf
// None; the backward reruns the forward and reads neither reserve,
// weight_buf nor output).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backendbench/tensor.hpp"
#include "common/result.hpp"

namespace kb::backendbench {

struct TorchOptions {
  std::string python;           // empty: the tuning setting `python` (KB_PYTHON, default python3)
  double timeout_s = 1800;      // per batch
};

struct TorchLine {
  std::string op;                        // "aten.add.Tensor"
  std::string args_text;                 // print_args of the line
  std::vector<const HostTensor*> inputs; // the materialized (and prepared) tensors, in materialize order
};

struct TorchLineResult {
  std::vector<HostTensor> outputs;  // undefined entries for None
  bool fp64 = false;                // computed in f64 and cast to the traced dtypes
  std::string error;                // non-empty: PyTorch could not run the line (the exception)
};

// The installed torch's version, or why python3 / torch cannot be used (cached per interpreter).
Result<std::string> torch_version(const TorchOptions& opt);

// Runs every line of the batch in one subprocess; one result per line.
Result<std::vector<TorchLineResult>> run_torch_lines(const std::vector<TorchLine>& lines, const TorchOptions& opt);

}  // namespace kb::backendbench
