// Provided by the CUDA Agent environment (solutions must not ship it).
// Each kernels/<name>_binding.cpp registers a function that adds its bindings to the module;
// binding.cpp applies them all inside PYBIND11_MODULE.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

class BindingRegistry {
public:
    using RegisterFn = std::function<void(pybind11::module&)>;

    static BindingRegistry& instance() {
        static BindingRegistry registry;  // constructed on first use: safe across translation units
        return registry;
    }

    void add(RegisterFn fn) { fns_.push_back(std::move(fn)); }

    void apply_all(pybind11::module& m) const {
        for (const auto& fn : fns_) fn(m);
    }

private:
    BindingRegistry() = default;
    BindingRegistry(const BindingRegistry&) = delete;
    BindingRegistry& operator=(const BindingRegistry&) = delete;

    std::vector<RegisterFn> fns_;
};

// REGISTER_BINDING(name, fn): registers `fn` (void(pybind11::module&)) when the library is loaded,
// through the constructor of a static object named after `name`.
#define REGISTER_BINDING(name, fn)                                              \
    static struct BindingRegistrar_##name {                                     \
        BindingRegistrar_##name() { BindingRegistry::instance().add(fn); }      \
    } binding_registrar_##name##_instance
