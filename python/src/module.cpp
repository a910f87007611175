/*
 * fold._C: the ProcessGroupFold class for Python (fold/torch_backend.py makes one per
 * torch.distributed group) and fold's version.
 */
#include "fold_torch.h"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

namespace {

c10::intrusive_ptr<fold_torch::ProcessGroupFold> make_group(
    const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
    const std::string &bootstrap, const py::object &delegate, size_t blocking_max)
{
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  if (!delegate.is_none()) {
    pg = delegate.cast<c10::intrusive_ptr<c10d::ProcessGroup>>();
  }
  /* fold_init is collective: other Python threads run meanwhile. */
  py::gil_scoped_release nogil;
  return c10::make_intrusive<fold_torch::ProcessGroupFold>(store, rank, size, bootstrap, pg,
                                                         blocking_max);
}

}  // namespace

PYBIND11_MODULE(_C, m)
{
  m.doc() = "fold's torch.distributed process group (see the fold package)";
  /* c10d's ProcessGroup and Store types must be registered before ours derives. */
  py::module::import("torch.distributed");

  py::class_<fold_torch::ProcessGroupFold, c10d::ProcessGroup,
             c10::intrusive_ptr<fold_torch::ProcessGroupFold>>(m, "ProcessGroupFold")
      .def(py::init(&make_group), py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("bootstrap") = "store", py::arg("delegate") = py::none(),
           py::arg("blocking_max") = 2048,
           "A fold process group over the ranks of store's rendezvous. bootstrap: 'store'"
           " (fold's allgather over the store) or 'pmix' (the launcher's). delegate: the"
           " process group for collectives fold does not serve, or None to refuse them."
           " blocking_max: all_reduce and reduce of at most this many bytes run blocking,"
           " larger ones on fold requests.")
      .def("shutdown", &fold_torch::ProcessGroupFold::shutdown,
           py::call_guard<py::gil_scoped_release>(),
           "Finalizes fold; collective. Idempotent; destroy_process_group and exit do it.")
      .def_property_readonly("has_delegate", &fold_torch::ProcessGroupFold::has_delegate)
      .def_property_readonly("bootstrap", &fold_torch::ProcessGroupFold::bootstrap,
                             "How fold started: 'store' or 'pmix'");

  m.def("shutdown_all", &fold_torch::FoldContext::shutdown_all,
        py::call_guard<py::gil_scoped_release>(),
        "Finalizes every fold process group still live; collective (the package calls it"
        " at exit)");
  m.def("version", [] { return std::string(fold_version_string()); },
        "The version of the libfold this extension runs on");
}
