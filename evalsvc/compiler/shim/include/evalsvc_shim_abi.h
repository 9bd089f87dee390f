// The C interface between a fast-path unit and the bridge (bridge.cpp): operator codes and the values
// and exports the generated binding unit hands over. Included by both sides, so they cannot drift.
#pragma once

#include <cstddef>
#include <cstdint>

namespace evalsvc_shim {
enum Op : int {
  EMPTY, ZEROS, ONES, FULL, EMPTY_LIKE, ZEROS_LIKE, ONES_LIKE, FULL_LIKE, CONTIGUOUS, CLONE, VIEW, RESHAPE,
  TRANSPOSE, PERMUTE, UNSQUEEZE, SQUEEZE_DIM, SQUEEZE, FLATTEN, NARROW, SELECT, EXPAND, TO_DTYPE, TO_DEVICE,
  ZERO_, FILL_, COPY_, T, EMPTY_STRIDED, AS_STRIDED, DETACH,
};
enum Kind : int32_t { K_VOID, K_TENSOR, K_INT, K_FLOAT, K_BOOL, K_TENSORS };
struct Value {
  int32_t kind;
  int64_t i;
  double f;
  void* t;        // K_TENSOR: a new reference
  void** ts;      // K_TENSORS: malloc'ed array of new references
  int64_t n;
};
struct Export {
  const char* name;
  const char* doc;
  int32_t n_args;
  const int32_t* arg_kinds;
  int32_t ret_kind;
  void* fn;
  int (*call)(void* fn, const Value* args, Value* ret, char* err, size_t err_len);
};
}  // namespace evalsvc_shim
