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
from . import _tfm
from ._session import (DeviceTensor, Entry, Generation, Module, Port, Session,
                       load)
from ._compiler import compile, tfmc_path
from ._inference import InferenceSession, NodeArg

__version__ = _tfm.runtime_version()
#: The model ABI version the runtime loads.
model_abi_version = _tfm.model_abi_version()

__all__ = [
    "compile", "load", "Module", "Session", "Entry", "Port", "Generation",
    "DeviceTensor",
    "InferenceSession", "NodeArg", "tfmc_path", "Error", "InvalidArgument",
    "NotFound", "Incompatible", "DataLoss", "ResourceExhausted", "Internal",
    "FailedPrecondition", "Unavailable", "OutOfRange", "Cancelled",
    "DeadlineExceeded", "CompileError",
]
