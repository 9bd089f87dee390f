// The fast path's bridge: the C interface evalsvc_torch_shim.h declares, over real ATen, and the Python
// module built from a fast-path unit's exports. Built once per toolchain and flag set by trusted code
// (evalsvc/compiler/fast_path.py) and linked into every fast-path library; no candidate text is in it.
// Compiled with EVALSVC_SHIM_CUDA for libraries that have CUDA sources.
#include <torch/extension.h>
#ifdef EVALSVC_SHIM_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstring>
#include <string>

#include "include/evalsvc_shim_abi.h"

namespace {

using namespace evalsvc_shim;  // NOLINT: the ABI shared with the stand-in

thread_local std::string last_error;

c10::TensorImpl* impl(void* t) { return static_cast<c10::TensorImpl*>(t); }

// A borrowed handle as a Tensor that holds its own reference.
at::Tensor borrow(void* t) {
  return at::Tensor(c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(impl(t)));
}

void* hand_over(at::Tensor t) { return t.unsafeReleaseTensorImpl(); }

at::TensorOptions options(int dtype, int device_type, int device_index) {
  const auto device = device_type == 1 ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index))
                                       : at::Device(at::kCPU);
  return at::TensorOptions().dtype(static_cast<at::ScalarType>(dtype)).device(device);
}

at::Tensor apply(int op, void* self, void* other, at::IntArrayRef ints, int dtype, int device_type,
                 int device_index, double scalar) {
  switch (op) {
    case EMPTY: return at::empty(ints, options(dtype, device_type, device_index));
    case ZEROS: return at::zeros(ints, options(dtype, device_type, device_index));
    case ONES: return at::ones(ints, options(dtype, device_type, device_index));
    case FULL: return at::full(ints, scalar, options(dtype, device_type, device_index));
    case EMPTY_STRIDED: {
      TORCH_CHECK(ints.size() % 2 == 0, "empty_strided: sizes and strides differ in length");
      const size_t n = ints.size() / 2;
      return at::empty_strided(ints.slice(0, n), ints.slice(n), options(dtype, device_type, device_index));
    }
    default: break;
  }
  TORCH_CHECK(self != nullptr, "operator on an undefined tensor");
  const at::Tensor x = borrow(self);
  switch (op) {
    case EMPTY_LIKE: return at::empty_like(x, options(dtype, device_type, device_index));
    case ZEROS_LIKE: return at::zeros_like(x, options(dtype, device_type, device_index));
    case ONES_LIKE: return at::ones_like(x, options(dtype, device_type, device_index));
    case FULL_LIKE: return at::full_like(x, scalar, options(dtype, device_type, device_index));
    case CONTIGUOUS: return x.contiguous();
    case CLONE: return x.clone();
    case DETACH: return x.detach();
    case VIEW: return x.view(ints);
    case RESHAPE: return x.reshape(ints);
    case TRANSPOSE: TORCH_CHECK(ints.size() == 2, "transpose: two dims"); return x.transpose(ints[0], ints[1]);
    case T: return x.t();
    case PERMUTE: return x.permute(ints);
    case UNSQUEEZE: TORCH_CHECK(ints.size() == 1, "unsqueeze: one dim"); return x.unsqueeze(ints[0]);
    case SQUEEZE_DIM: TORCH_CHECK(ints.size() == 1, "squeeze: one dim"); return x.squeeze(ints[0]);
    case SQUEEZE: return x.squeeze();
    case FLATTEN: TORCH_CHECK(ints.size() == 2, "flatten: two dims"); return x.flatten(ints[0], ints[1]);
    case NARROW: TORCH_CHECK(ints.size() == 3, "narrow: three ints"); return x.narrow(ints[0], ints[1], ints[2]);
    case SELECT: TORCH_CHECK(ints.size() == 2, "select: two ints"); return x.select(ints[0], ints[1]);
    case EXPAND: return x.expand(ints);
    case TO_DTYPE: return x.to(static_cast<at::ScalarType>(dtype));
    case TO_DEVICE: return x.to(options(static_cast<int>(x.scalar_type()), device_type, device_index).device());
    case ZERO_: { at::Tensor y = x; y.zero_(); return y; }
    case FILL_: { at::Tensor y = x; y.fill_(scalar); return y; }
    case COPY_: {
      TORCH_CHECK(other != nullptr, "copy_ from an undefined tensor");
      at::Tensor y = x;
      y.copy_(borrow(other));
      return y;
    }
    default: TORCH_CHECK(false, "evalsvc shim: unknown operator ", op);
  }
}

at::Tensor tensor_arg(PyObject* o, size_t i) {
  if (!THPVariable_Check(o)) {
    throw pybind11::type_error("argument " + std::to_string(i + 1) + " must be a torch.Tensor");
  }
  return THPVariable_Unpack(o);
}

pybind11::object call_export(const Export& e, pybind11::args args) {
  if (static_cast<int64_t>(args.size()) != e.n_args) {
    throw pybind11::type_error(std::string(e.name) + "(): takes " + std::to_string(e.n_args) +
                               " positional arguments but " + std::to_string(args.size()) + " were given");
  }
  std::vector<Value> values(e.n_args);
  std::vector<at::Tensor> held;  // the arguments' tensors live until the call returns
  held.reserve(e.n_args);
  for (int32_t i = 0; i < e.n_args; ++i) {
    pybind11::handle a = args[i];
    Value& v = values[i];
    v.kind = e.arg_kinds[i];
    switch (v.kind) {
      case K_TENSOR: held.push_back(tensor_arg(a.ptr(), i)); v.t = held.back().unsafeGetTensorImpl(); break;
      case K_INT: v.i = a.cast<int64_t>(); break;
      case K_FLOAT: v.f = a.cast<double>(); break;
      case K_BOOL: v.i = a.cast<bool>() ? 1 : 0; break;
      default: throw pybind11::type_error("evalsvc shim: unsupported argument kind");
    }
  }
  Value ret{};
  char err[2048] = {0};
  const int failed = e.call(e.fn, values.data(), &ret, err, sizeof err);  // with the GIL, as pybind11's m.def
  if (failed) throw std::runtime_error(err);
  switch (ret.kind) {
    case K_VOID: return pybind11::none();
    case K_TENSOR: {
      at::Tensor t(c10::intrusive_ptr<c10::TensorImpl>::reclaim(impl(ret.t)));
      return pybind11::reinterpret_steal<pybind11::object>(THPVariable_Wrap(std::move(t)));
    }
    case K_TENSORS: {
      pybind11::list out;
      for (int64_t i = 0; i < ret.n; ++i) {
        at::Tensor t(c10::intrusive_ptr<c10::TensorImpl>::reclaim(impl(ret.ts[i])));
        out.append(pybind11::reinterpret_steal<pybind11::object>(THPVariable_Wrap(std::move(t))));
      }
      std::free(ret.ts);
      return out;
    }
    case K_INT: return pybind11::int_(ret.i);
    case K_BOOL: return pybind11::bool_(ret.i != 0);
    default: return pybind11::float_(ret.f);
  }
}

}  // namespace

extern "C" {
void evalsvc_shim_incref(void* t) { c10::raw::intrusive_ptr::incref(impl(t)); }
void evalsvc_shim_decref(void* t) { c10::raw::intrusive_ptr::decref(impl(t)); }
int64_t evalsvc_shim_dim(void* t) { return impl(t)->dim(); }
const int64_t* evalsvc_shim_sizes(void* t) { return impl(t)->sizes().data(); }
const int64_t* evalsvc_shim_strides(void* t) { return impl(t)->strides().data(); }
int64_t evalsvc_shim_numel(void* t) { return impl(t)->numel(); }
int64_t evalsvc_shim_storage_offset(void* t) { return impl(t)->storage_offset(); }
int evalsvc_shim_dtype(void* t) { return static_cast<int>(impl(t)->dtype().toScalarType()); }
int evalsvc_shim_device_type(void* t) { return impl(t)->device().is_cuda() ? 1 : 0; }
int evalsvc_shim_device_index(void* t) { return impl(t)->device().index(); }
int evalsvc_shim_is_contiguous(void* t) { return impl(t)->is_contiguous() ? 1 : 0; }
int evalsvc_shim_requires_grad(void* t) { return impl(t)->requires_grad() ? 1 : 0; }
void* evalsvc_shim_data(void* t) { return borrow(t).data_ptr(); }
const char* evalsvc_shim_error(void) { return last_error.c_str(); }

void* evalsvc_shim_op(int op, void* self, void* other, const int64_t* ints, int64_t n_ints, int dtype,
                      int device_type, int device_index, double scalar) {
  try {
    return hand_over(apply(op, self, other, at::IntArrayRef(ints, static_cast<size_t>(n_ints)), dtype,
                           device_type, device_index, scalar));
  } catch (const std::exception& e) {
    last_error = e.what();
    return nullptr;
  }
}

#ifdef EVALSVC_SHIM_CUDA
void* evalsvc_shim_current_stream(int device_index) {
  return at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index)).stream();
}
int evalsvc_shim_exchange_device(int device_index) {
  return c10::cuda::ExchangeDevice(static_cast<c10::DeviceIndex>(device_index));
}
const void* evalsvc_shim_device_properties(int device_index) {
  return device_index < 0 ? at::cuda::getCurrentDeviceProperties()
                          : at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device_index));
}
#endif

PyObject* evalsvc_shim_module(const char* name, const Export* exports, int64_t n) {
  try {
    auto* def = new PyModuleDef{PyModuleDef_HEAD_INIT, name, nullptr, -1, nullptr, nullptr, nullptr, nullptr, nullptr};
    pybind11::module_ m = pybind11::reinterpret_steal<pybind11::module_>(PyModule_Create(def));
    if (!m) return nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const Export e = exports[i];
      m.def(e.name, [e](pybind11::args args) { return call_export(e, args); }, e.doc);
    }
    return m.release().ptr();
  } catch (pybind11::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_ImportError, e.what());
  }
  return nullptr;
}
}
