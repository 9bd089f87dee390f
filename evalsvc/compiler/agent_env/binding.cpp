// Provided by the CUDA Agent environment (solutions must not ship it): the module's entry point.
#include <torch/extension.h>

#include "binding_registry.h"

PYBIND11_MODULE(cuda_extension, m) {
    BindingRegistry::instance().apply_all(m);
}
