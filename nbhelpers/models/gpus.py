"""GPU memory sizes as the NVIDIA driver reports them, and how much of that vLLM sees.

``nvidia-smi`` (and DCGM's framebuffer fields, which are in MiB too) report a device total
that is a little smaller than the marketing size in GB (10^9 bytes) and a little larger than
the total that CUDA (``torch.cuda.mem_get_info``) gives vLLM, which logs it as
``total_gpu_memory``. Measured gaps between the two: RTX 3090 nvidia-smi 24576 MiB (24.00 GiB)
vs vLLM ``total_gpu_memory=23.58GiB`` (vllm-project/vllm#10517), A100-SXM4-40GB 40960 MiB
(40.00 GiB) vs ``total_gpu_memory (39.38GiB)`` (vllm-project/vllm#16570): 0.42-0.62 GiB.
:data:`CUDA_RESERVED_GIB` is the midpoint used to go from the table to what the engine sees.

Every size below is copied from a published ``nvidia-smi`` output; the source is cited next
to it. The H200 is missing on purpose: no citable driver-reported total was found; pass
``--gpu-memory`` for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nbhelpers.errors import RunbookError

MIB = 1024**2
GIB = 1024**3
CUDA_RESERVED_GIB = 0.5


@dataclass(frozen=True)
class GpuModel:
    """One GPU model: the total memory the driver reports, and where that number comes from."""

    name: str  # the name used on the command line (``--gpu``)
    device_name: str  # the name nvidia-smi prints
    driver_total_mib: int
    source: str

    @property
    def engine_total_bytes(self) -> int:
        """The total vLLM sees (``total_gpu_memory``): the driver's total less the CUDA reserve."""
        return self.driver_total_mib * MIB - int(CUDA_RESERVED_GIB * GIB)


GPUS: tuple[GpuModel, ...] = (
    GpuModel(
        "H100-80GB",
        "NVIDIA H100 80GB HBM3",
        81559,
        "modal-labs/modal-client#2797 (nvidia-smi totals across GPU types: 'H100: 81559MiB')",
    ),
    GpuModel("H100-NVL", "NVIDIA H100 NVL", 95830, "NVIDIA/gpu-admin-tools#4 (nvidia-smi: '0MiB / 95830MiB')"),
    GpuModel(
        "A100-80GB",
        "NVIDIA A100-SXM4-80GB",
        81920,
        "modal-labs/modal-client#2797 ('A100 80GB: 81920MiB')",
    ),
    GpuModel(
        "A100-40GB",
        "NVIDIA A100-SXM4-40GB",
        40960,
        "modal-labs/modal-client#2797 ('A100 40GB: 40960MiB'); bottlerocket-os/bottlerocket-core-kit#834",
    ),
    GpuModel("L40S", "NVIDIA L40S", 46068, "modal-labs/modal-client#2797; akash-network/provider-configs#99"),
    GpuModel("L4", "NVIDIA L4", 23034, "modal-labs/modal-client#2797 ('L4: 23034MiB')"),
    GpuModel("A10G", "NVIDIA A10G", 23028, "NVIDIA/DCGM#232 (nvidia-smi: '8722MiB / 23028MiB')"),
    GpuModel("A10", "NVIDIA A10", 23028, "modal-labs/modal-client#2797 ('A10: 23028MiB')"),
    GpuModel("T4", "Tesla T4", 15360, "modal-labs/modal-client#2797 ('T4: 15360MiB')"),
    GpuModel(
        "V100-16GB",
        "Tesla V100-SXM2-16GB",
        16160,
        "4paradigm/k8s-vgpu-scheduler#7 (nvidia-smi: '112MiB / 16160MiB')",
    ),
    GpuModel("V100-32GB", "Tesla V100-SXM2-32GB", 32480, "godweiyang/GrabGPU#5 (nvidia-smi: '0MiB / 32480MiB')"),
    GpuModel(
        "RTX-4090",
        "NVIDIA GeForce RTX 4090",
        24564,
        "vllm-project/vllm#7768 (nvidia-smi: '14214MiB / 24564MiB')",
    ),
    GpuModel(
        "RTX-3090",
        "NVIDIA GeForce RTX 3090",
        24576,
        "noonghunna/club-3090#1127 (nvidia-smi: '22591MiB / 24576MiB')",
    ),
)


def gpu_named(name: str) -> GpuModel:
    """The table entry for ``name`` (case-insensitive); unknown names list the known ones."""
    wanted = name.strip().lower()
    for gpu in GPUS:
        if wanted in (gpu.name.lower(), gpu.device_name.lower()):
            return gpu
    known = ", ".join(gpu.name for gpu in GPUS)
    raise RunbookError(f"unknown GPU {name!r} (known: {known}); or give --gpu-memory, e.g. 23.58GiB")


# --- MIG slices -----------------------------------------------------------------------------------------
#
# With the GPU operator's (device plugin's) MIG strategy ``mixed`` a pod requests one slice by profile,
# ``nvidia.com/mig-<compute slices>g.<memory>gb`` (``nvidia.com/mig-1g.10gb``, ``nvidia.com/mig-3g.40gb``), and GPU
# feature discovery labels the node per profile: ``nvidia.com/mig-3g.40gb.memory`` is the slice's memory in MiB,
# while ``nvidia.com/gpu.memory`` and ``nvidia.com/gpu.product`` still describe the whole card (NVIDIA
# k8s-device-plugin ``docs/gpu-feature-discovery/README.md``, "MIG 'mixed' strategy"; GPU operator "GPU Operator
# with MIG"). With the ``single`` strategy the pod requests ``nvidia.com/gpu`` and feature discovery overrides
# ``nvidia.com/gpu.memory`` with the slice's size and ``nvidia.com/gpu.product`` with e.g.
# ``A100-SXM4-40GB-MIG-1g.5gb``. CUDA names a slice after its card, ``NVIDIA A100-SXM4-80GB MIG 1g.10gb``
# (``torch.cuda.get_device_name``), and reports the slice's memory as its total: vLLM sizes everything from it.

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
_MIG_PROFILE = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb")


@dataclass(frozen=True)
class MigSlice:
    """One MIG profile as a pod requests it (``nvidia.com/mig-3g.40gb``)."""

    resource: str
    compute_slices: int
    memory_gb: int  # the profile's size in its name, decimal GB

    @property
    def profile(self) -> str:
        """``3g.40gb``, as CUDA appends it to the card's name."""
        return f"{self.compute_slices}g.{self.memory_gb}gb"

    @property
    def memory_label(self) -> str:
        """GPU feature discovery's label with the slice's memory in MiB (mixed strategy)."""
        return f"{self.resource}.memory"

    @property
    def nominal_bytes(self) -> int:
        """The size the name gives (10^9 bytes per GB). The real slice is a little larger (1g.10gb: 9728 MiB, 10.2 GB):
        a lower bound, for when no label tells the exact size."""
        return self.memory_gb * 10**9


def mig_slice(resource: str) -> MigSlice | None:
    """The MIG profile of a device resource name, or None for a whole GPU (``nvidia.com/gpu``) or other devices."""
    match = _MIG_PROFILE.match(resource)
    return MigSlice(resource, int(match.group(1)), int(match.group(2))) if match else None
