"""The errors shapejit raises.

Every failure of the library arrives as a subclass of :class:`Error` carrying the library's message
(which names the offending argument and says what would be accepted) and its status code, the
same number as the C API's ``sj_status`` and C++'s ``shapejit::ErrorCode``.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every shapejit error.

    Attributes:
        message: the library's message.
        status: the status code (``sj_status``): 1 invalid argument, 2 unsupported, 3 compile
            failed, 4 NVRTC unavailable, 5 driver unavailable, 6 driver error, 7 offline miss,
            8 I/O error, 9 internal.
    """

    status: int = 9

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    @property
    def status_name(self) -> str:
        """The status as the C API names it, e.g. ``"SJ_INVALID_ARGUMENT"``."""
        return STATUS_NAMES[self.status] if 0 <= self.status < len(STATUS_NAMES) else "SJ_INTERNAL"


class InvalidArgumentError(Error, ValueError):
    """A shape, stride, dtype, alignment, overlap or option the operation cannot accept."""

    status = 1


class UnsupportedError(Error):
    """Valid, but not supported by this build (a rank over the limit, an unknown rope type)."""

    status = 2


class CompileError(Error):
    """NVRTC rejected the generated source; the message carries its log."""

    status = 3


class NvrtcUnavailableError(Error):
    """NVRTC could not be loaded (needed only on a kernel cache miss)."""

    status = 4


class DriverUnavailableError(Error):
    """The CUDA driver could not be loaded or has no device: launches need a GPU."""

    status = 5


class DriverError(Error):
    """A CUDA driver call failed (launch, module load, context)."""

    status = 6


class OfflineMissError(Error):
    """Offline mode and the kernel is in no cache; the message names the manifest line."""

    status = 7


class CacheIOError(Error):
    """A file could not be read or written."""

    status = 8


class InternalError(Error):
    """A bug in shapejit."""

    status = 9


STATUS_NAMES = (
    "SJ_OK",
    "SJ_INVALID_ARGUMENT",
    "SJ_UNSUPPORTED",
    "SJ_COMPILE_FAILED",
    "SJ_NVRTC_UNAVAILABLE",
    "SJ_DRIVER_UNAVAILABLE",
    "SJ_DRIVER_ERROR",
    "SJ_OFFLINE_MISS",
    "SJ_IO_ERROR",
    "SJ_INTERNAL",
)

#: The class raised for each status code; index 0 (ok) is never raised.
CLASSES_BY_STATUS: tuple[type[Error], ...] = (
    Error,
    InvalidArgumentError,
    UnsupportedError,
    CompileError,
    NvrtcUnavailableError,
    DriverUnavailableError,
    DriverError,
    OfflineMissError,
    CacheIOError,
    InternalError,
)

for _cls in CLASSES_BY_STATUS:
    _cls.__module__ = "shapejit"
