"""The exceptions of tfm: one per status code of the runtime's C API."""


class Error(Exception):
    """A failed tfm call. `code` is the runtime's status code (runtime.h),
    `message` what it said."""

    code = None

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgument(Error, ValueError):
    """A bad input: dtype, shape, count or name."""
    code = 1


class NotFound(Error, LookupError):
    """A missing file, entry point or tensor."""
    code = 2


class Incompatible(Error):
    """A model built for another ABI version or device."""
    code = 3


class DataLoss(Error):
    """A truncated or corrupt model file or checkpoint."""
    code = 4


class ResourceExhausted(Error, MemoryError):
    code = 5


class Internal(Error):
    code = 6


class FailedPrecondition(Error):
    """For example, a session another thread is running."""
    code = 7


class Unavailable(Error):
    """The device is not there: no GPU driver, no GPU."""
    code = 8


class OutOfRange(Error, ValueError):
    """A size outside what the model was compiled for."""
    code = 9


class Cancelled(Error):
    code = 10


class DeadlineExceeded(Error, TimeoutError):
    code = 11


class CompileError(Error):
    """tfmc refused the model; `message` is what it printed, `exit_code`
    its exit status. (A bad option raises InvalidArgument.)"""
    code = None


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgument, NotFound, Incompatible, DataLoss, ResourceExhausted,
    Internal, FailedPrecondition, Unavailable, OutOfRange, Cancelled,
    DeadlineExceeded)}


def error_for(code, message):
    """The exception for a runtime status (called by the extension)."""
    return _BY_CODE.get(code, Error)(message, code)
