"""tfm: compile Transformer models ahead of time, and run, train and
generate from them.

    import tfm
    module = tfm.compile("model.onnx", shapes={"batch": 1, "sequence": 128})
    session = module.session(threads=4)
    outputs = session.run({"input_ids": ids})

tfm.InferenceSession(path) offers ONNX Runtime's session API. Errors are
tfm.Error subclasses carrying the runtime's status code: tfm.InvalidArgument,
tfm.NotFound, tfm.DataLoss, ... See docs/python.md."""

from ._errors import (Cancelled, CompileError, DataLoss, DeadlineExceeded,
                      Error, FailedPrecondition, Incompatible, Internal,
                      InvalidArgument, NotFound, OutOfRange, ResourceExhausted,
                      Unavailable)
try:
    from . import _tfm
except ImportError as e:
    import glob as _glob
    import os as _os
    import sys as _sys
    _built = _glob.glob(_os.path.join(_os.path.dirname(__file__), "_tfm.*.so"))
    if _built and not _glob.glob(_os.path.join(
            _os.path.dirname(__file__), f"_tfm.{_sys.implementation.cache_tag}-*.so")):
        # The extension is for another interpreter: say so, rather than the
        # loader's "No module named tfm._tfm".
        raise ImportError(
            f"tfm was built for another Python ({_os.path.basename(_built[0])}), "
            f"not for this one ({_sys.executable}, "
            f"{_sys.implementation.cache_tag}); install it with this "
            f"interpreter: {_sys.executable} -m pip install --no-build-isolation "
            "PATH_TO_TFM") from e
    raise
from ._session import (Communicator, DeviceTensor, Entry, Generation, Module,
                       Port, Session, load, mpi_communicator,
                       nccl_communicator)
from ._compiler import compile, tfmc_path
from ._inference import (GraphOptimizationLevel, InferenceSession,
                         ModelMetadata, NodeArg, SessionOptions,
                         get_available_providers)

__version__ = _tfm.runtime_version()
#: The model ABI version the runtime loads.
model_abi_version = _tfm.model_abi_version()

__all__ = [
    "compile", "load", "Module", "Session", "Entry", "Port", "Generation",
    "DeviceTensor",
    "InferenceSession", "NodeArg", "ModelMetadata", "SessionOptions",
    "GraphOptimizationLevel",
    "get_available_providers", "tfmc_path", "Error", "InvalidArgument",
    "NotFound", "Incompatible", "DataLoss", "ResourceExhausted", "Internal",
    "FailedPrecondition", "Unavailable", "OutOfRange", "Cancelled",
    "DeadlineExceeded", "CompileError",
]
