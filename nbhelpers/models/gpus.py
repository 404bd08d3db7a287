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
