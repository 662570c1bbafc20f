"""NCCL's out-of-place all_reduce and broadcast, which torch.distributed does not call (nccl-tests
times them): the library torch loaded, on torch's own communicator and the current stream.
"""

from __future__ import annotations

import ctypes
import os

import torch
import torch.distributed as dist

NCCL_FLOAT32, NCCL_SUM = 7, 0  # ncclFloat32 and ncclSum in nccl.h


def _library() -> ctypes.CDLL:
    """The libnccl.so.2 torch loaded (dlopen finds the loaded copy by name), else the wheel's."""
    try:
        return ctypes.CDLL("libnccl.so.2")
    except OSError:
        import nvidia.nccl  # type: ignore[import-not-found]  # torch's CUDA wheels depend on it

        folder = list(nvidia.nccl.__path__)[0]  # a namespace package: it has no __file__
        return ctypes.CDLL(os.path.join(folder, "lib", "libnccl.so.2"))


class NcclOutOfPlace:
    """``all_reduce(send, recv)`` (sum) and ``broadcast(send, recv, root)`` of float32 tensors on
    this rank's GPU, on the current CUDA stream (so CUDA events and graph capture see them)."""

    def __init__(self) -> None:
        if dist.get_backend() != "nccl":
            raise ValueError("NcclOutOfPlace needs an NCCL process group (gloo has no NCCL)")
        device = torch.device("cuda", torch.cuda.current_device())
        backend = dist.group.WORLD._get_backend(device)  # type: ignore[union-attr]
        if not hasattr(backend, "_comm_ptr"):
            raise ValueError(f"this torch ({torch.__version__}) does not expose _comm_ptr()")
        dist.all_reduce(torch.zeros(1, device=device))  # the communicator exists once it ran
        torch.cuda.synchronize(device)
        self.comm = ctypes.c_void_p(backend._comm_ptr())
        self.lib = _library()

    def all_reduce(self, send: torch.Tensor, recv: torch.Tensor) -> None:
        self._call("ncclAllReduce", send, recv, NCCL_SUM)

    def broadcast(self, send: torch.Tensor, recv: torch.Tensor, root: int = 0) -> None:
        """``send`` is read on the root only."""
        self._call("ncclBroadcast", send, recv, root)

    def _call(self, name: str, send: torch.Tensor, recv: torch.Tensor, op_or_root: int) -> None:
        """``name(send, recv, count, float32, op_or_root, comm, stream)`` on the current stream."""
        result = getattr(self.lib, name)(
            ctypes.c_void_p(send.data_ptr()),
            ctypes.c_void_p(recv.data_ptr()),
            ctypes.c_size_t(send.numel()),
            NCCL_FLOAT32,
            op_or_root,
            self.comm,
            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
        )
        if result != 0:
            self.lib.ncclGetErrorString.restype = ctypes.c_char_p
            raise RuntimeError(f"{name}: {self.lib.ncclGetErrorString(result).decode()}")
