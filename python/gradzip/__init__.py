"""gradzip for PyTorch: gradzip's compressors, collectives and controller as a
DistributedDataParallel communication hook.

    state, hook = gradzip.ddp_hook({"name": "thc", "collective": "ps", "thc": {"bits": 4}})
    model.register_comm_hook(state, hook)

The extension module gradzip._C is built against one torch version (the
pinned wheel); importing it under another torch fails with an ImportError that
names both, rather than with an undefined symbol. docs/pytorch.md has the
details.
"""

import torch

from . import _build_info


def _release(v: str) -> str:
    return v.split("+", 1)[0]


if _release(torch.__version__) != _release(_build_info.torch_version):
    raise ImportError(
        f"gradzip {_build_info.version} was built against torch {_build_info.torch_version}, "
        f"but this environment has torch {torch.__version__}; rebuild gradzip against this torch "
        f"(pip install --no-build-isolation .) or install torch {_release(_build_info.torch_version)}"
    )

import torch.distributed  # noqa: E402  (registers the ProcessGroup type _C accepts)

from . import _C  # noqa: E402
from ._C import NonFiniteGradientError  # noqa: E402
from .ddp import HookState, ddp_hook  # noqa: E402

__version__ = _build_info.version
__all__ = ["ddp_hook", "HookState", "NonFiniteGradientError", "compressor_names", "__version__"]


def compressor_names():
    """The compressors a plan may name."""
    return list(_C.compressor_names())
