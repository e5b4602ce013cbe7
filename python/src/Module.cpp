// gradzip._C: the Python extension module. It binds DdpHook (the state behind
// gradzip.ddp_hook) and the names Python needs to validate plans; gradzip's own
// errors become Python exceptions: a bad plan or option ValueError, a
// non-finite gradient gradzip.NonFiniteGradientError (a FloatingPointError),
// a communication failure RuntimeError. python/gradzip/ wraps it.
#include "compress/Factory.h"
#include "python/src/DdpHook.h"
#include "util/Error.h"

#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;
using gradzip::python::DdpHook;
using gradzip::python::DdpHookOptions;

namespace {

std::vector<gradzip::compress::TensorSlot> toLayout(const std::vector<py::tuple>& slots) {
  std::vector<gradzip::compress::TensorSlot> layout;
  layout.reserve(slots.size());
  for (const auto& s : slots)
    layout.push_back({s[0].cast<std::string>(), s[1].cast<std::vector<int64_t>>(), s[2].cast<int64_t>(),
                      s[3].cast<int64_t>()});
  return layout;
}

// Destroying a hook joins its communication thread, which may still need the
// GIL to drop the Python callback of a future it just completed: the GIL is
// released while it joins.
struct ReleaseGilDelete {
  void operator()(DdpHook* h) const {
    py::gil_scoped_release release;
    delete h;
  }
};
using HookHolder = std::unique_ptr<DdpHook, ReleaseGilDelete>;

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "gradzip's C++ core: compressed gradient synchronisation for PyTorch DDP";
  m.attr("torch_version") = GRADZIP_TORCH_VERSION;
  m.attr("version") = GRADZIP_VERSION;

  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::object> nonFinite;
  nonFinite.call_once_and_store_result([&] {
    return py::exception<gradzip::python::NonFiniteGradient>(m, "NonFiniteGradientError", PyExc_FloatingPointError);
  });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const gradzip::UserError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const gradzip::python::NonFiniteGradient& e) {
      py::set_error(nonFinite.get_stored(), e.what());
    }
  });

  m.def("compressor_names", &gradzip::compress::compressorNames,
        "The compressors a plan may name (compress/Factory.cpp).");

  py::class_<DdpHook, HookHolder>(m, "DdpHook")
      .def(py::init([](const c10::intrusive_ptr<c10d::ProcessGroup>& group, std::string plan, std::string logDir,
                       bool namedTensors, uint64_t seed, std::string nanPolicy, int64_t nanSkipMaxRun) {
             DdpHookOptions o{std::move(plan), std::move(logDir), namedTensors, seed, std::move(nanPolicy),
                              nanSkipMaxRun};
             return HookHolder(new DdpHook(group, std::move(o)));
           }),
           py::arg("group"), py::arg("plan"), py::arg("log_dir"), py::arg("named_tensors"), py::arg("seed"),
           py::arg("nan_policy"), py::arg("nan_skip_max_run"))
      .def(
          "submit",
          [](DdpHook& h, int index, const at::Tensor& buffer, const std::vector<py::tuple>& slots, bool last) {
            auto layout = toLayout(slots);
            c10::intrusive_ptr<c10::ivalue::Future> future;
            {
              py::gil_scoped_release release;
              future = h.submit(index, buffer, std::move(layout), last);
            }
            return torch::jit::toPyObject(c10::IValue(std::move(future)));
          },
          py::arg("index"), py::arg("buffer"), py::arg("layout"), py::arg("last"))
      .def_property_readonly("step", &DdpHook::step)
      .def_property_readonly("skipped_steps", &DdpHook::skippedSteps)
      .def_property_readonly("last_step_skipped", &DdpHook::lastStepSkipped)
      .def_property_readonly("num_buckets", &DdpHook::numBuckets)
      .def_property_readonly("backend", &DdpHook::backend)
      .def("plan_key", &DdpHook::planKey, py::arg("bucket"))
      .def("save", [](const DdpHook& h) { return py::bytes(h.save()); })
      .def("load", [](DdpHook& h, const py::bytes& b) { h.load(std::string(b)); });
}
