"""GPU identity: real names from NVML, GPU feature discovery, GKE, Karpenter and cloud instance types."""

from __future__ import annotations

import pytest
from statictrain import gpus
from statictrain.gpus import UNKNOWN, from_instance_type, from_name, from_node_labels
from statictrain.pricing import parse_catalog, shipped_catalog_text

# (name as a real system writes it, family, memory GB, form)
NAMES = [
    # NVML product names (nvmlDeviceGetName), as the sidecar exports them in gpu_model
    ("NVIDIA H200", "H200", 141, ""),
    ("NVIDIA H200 NVL", "H200", 141, "NVL"),
    ("NVIDIA GH200 480GB", "GH200", None, ""),
    ("NVIDIA GH200 144G HBM3e", "GH200", 144, "SXM"),
    ("NVIDIA H100 80GB HBM3", "H100", 80, "SXM"),
    ("NVIDIA H100 PCIe", "H100", 80, "PCIe"),
    ("NVIDIA H100 NVL", "H100", 94, "NVL"),
    ("NVIDIA B200", "B200", 180, ""),
    ("NVIDIA A100-SXM4-80GB", "A100", 80, "SXM"),
    ("NVIDIA A100-SXM4-40GB", "A100", 40, "SXM"),
    ("NVIDIA A100-PCIE-40GB", "A100", 40, "PCIe"),
    ("NVIDIA A100 80GB PCIe", "A100", 80, "PCIe"),
    ("A100-SXM4-40GB", "A100", 40, "SXM"),
    ("NVIDIA L40S", "L40S", 48, ""),
    ("NVIDIA L40", "L40", 48, ""),
    ("NVIDIA L4", "L4", 24, ""),
    ("NVIDIA A10G", "A10G", 24, ""),
    ("NVIDIA A10", "A10", 24, ""),
    ("Tesla T4", "T4", 16, ""),
    ("Tesla V100-SXM2-16GB", "V100", 16, "SXM"),
    ("Tesla V100-SXM2-32GB", "V100", 32, "SXM"),
    ("Tesla V100-PCIE-16GB", "V100", 16, "PCIe"),
    ("Tesla V100S-PCIE-32GB", "V100", 32, "PCIe"),
    ("Tesla P100-PCIE-16GB", "P100", 16, "PCIe"),
    # nvidia.com/gpu.product labels (GPU feature discovery)
    ("NVIDIA-H100-80GB-HBM3", "H100", 80, "SXM"),
    ("NVIDIA-H100-NVL", "H100", 94, "NVL"),
    ("NVIDIA-H200", "H200", 141, ""),
    ("NVIDIA-GH200-480GB", "GH200", None, ""),
    ("NVIDIA-A100-SXM4-80GB", "A100", 80, "SXM"),
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100", 40, "SXM"),
    ("NVIDIA-A10G", "A10G", 24, ""),
    ("NVIDIA-L40S", "L40S", 48, ""),
    ("Tesla-T4", "T4", 16, ""),
    ("Tesla-V100-SXM2-16GB", "V100", 16, "SXM"),
    # GKE cloud.google.com/gke-accelerator values
    ("nvidia-tesla-t4", "T4", 16, ""),
    ("nvidia-tesla-v100", "V100", 16, ""),
    ("nvidia-tesla-a100", "A100", 40, ""),
    ("nvidia-a100-80gb", "A100", 80, ""),
    ("nvidia-l4", "L4", 24, ""),
    ("nvidia-h100-80gb", "H100", 80, ""),
    ("nvidia-h100-mega-80gb", "H100", 80, ""),
    ("nvidia-h200-141gb", "H200", 141, ""),
    ("nvidia-b200", "B200", 180, ""),
    ("nvidia-gb200", "GB200", 186, ""),
    # Karpenter karpenter.k8s.aws/instance-gpu-name values
    ("h100", "H100", None, ""),
    ("a10g", "A10G", 24, ""),
    ("l40s", "L40S", 48, ""),
    # catalog and job-spec names
    ("H100-80GB", "H100", 80, ""),
    ("H100-NVL-94GB", "H100", 94, "NVL"),
    ("A100-40GB", "A100", 40, ""),
    ("A100", "A100", None, ""),
    ("V100-32GB", "V100", 32, ""),
]


@pytest.mark.parametrize(("name", "family", "memory", "form"), NAMES, ids=[n[0] for n in NAMES])
def test_from_name(name: str, family: str, memory: int | None, form: str) -> None:
    got = from_name(name)
    assert (got.family, got.memory_gb, got.form, got.source, got.known) == (family, memory, form, name, True)


@pytest.mark.parametrize(
    "name",
    ["", "   ", "NVIDIA RTX A6000", "Some-New-GPU", "V100M32", "G2", "NVIDIA", "Tesla K80", "AMD Instinct MI300X"],
)
def test_unknown_names_are_unknown_not_a_default(name: str) -> None:
    got = from_name(name)
    assert (got.family, got.known, got.model, got.source) == (UNKNOWN, False, None, name)


INSTANCE_TYPES = [
    # AWS
    ("p5.48xlarge", "H100", 80),
    ("p5e.48xlarge", "H200", 141),
    ("p5en.48xlarge", "H200", 141),
    ("p4d.24xlarge", "A100", 40),
    ("p4de.24xlarge", "A100", 80),
    ("p3.2xlarge", "V100", 16),
    ("p3dn.24xlarge", "V100", 32),
    ("p6-b200.48xlarge", "B200", 180),
    ("g4dn.xlarge", "T4", 16),
    ("g4dn.metal", "T4", 16),
    ("g5.48xlarge", "A10G", 24),
    ("g6.xlarge", "L4", 24),
    ("g6e.12xlarge", "L40S", 48),
    # GCP
    ("a2-highgpu-1g", "A100", 40),
    ("a2-megagpu-16g", "A100", 40),
    ("a2-ultragpu-8g", "A100", 80),
    ("a3-highgpu-8g", "H100", 80),
    ("a3-megagpu-8g", "H100", 80),
    ("a3-ultragpu-8g", "H200", 141),
    ("a4-highgpu-8g", "B200", 180),
    ("g2-standard-12", "L4", 24),
    ("n1-standard-8+1xT4", "T4", 16),
    ("n1-highmem-8+1xV100", "V100", 16),
    # Azure
    ("Standard_ND96isr_H100_v5", "H100", 80),
    ("Standard_NC40ads_H100_v5", "H100", 94),
    ("Standard_ND96isr_H200_v5", "H200", 141),
    ("Standard_NC24ads_A100_v4", "A100", 80),
    ("Standard_ND96amsr_A100_v4", "A100", 80),
    ("Standard_ND96asr_v4", "A100", 40),
    ("Standard_NC4as_T4_v3", "T4", 16),
    ("Standard_NC6s_v3", "V100", 16),
    ("Standard_ND40rs_v2", "V100", 32),
    ("Standard_NV36ads_A10_v5", "A10", 24),
]


@pytest.mark.parametrize(("it", "family", "memory"), INSTANCE_TYPES, ids=[i[0] for i in INSTANCE_TYPES])
def test_from_instance_type(it: str, family: str, memory: int) -> None:
    got = from_instance_type(it)
    assert (got.family, got.memory_gb, got.source) == (family, memory, it)


@pytest.mark.parametrize("it", ["m5.large", "n1-standard-8", "Standard_D4s_v5", "", "c7g.metal", "p2.xlarge"])
def test_cpu_and_unlisted_instance_types_are_unknown(it: str) -> None:
    assert from_instance_type(it).family == UNKNOWN


def test_every_catalog_row_identifies_consistently() -> None:
    """The catalog's instance type and its gpu_model column name the same GPU, for every row."""
    for e in parse_catalog(shipped_catalog_text()).entries:
        by_type = from_instance_type(e.instance_type)
        by_model = from_name(e.gpu_model)
        assert by_type.model == e.gpu_model, e
        assert by_model.model == e.gpu_model, e


KARPENTER_NAME, KARPENTER_MEMORY = gpus.KARPENTER_GPU_NAME_LABEL, gpus.KARPENTER_GPU_MEMORY_LABEL


@pytest.mark.parametrize(
    ("labels", "family", "memory"),
    [
        pytest.param({gpus.GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}, "H100", 80, id="gfd"),
        pytest.param({gpus.GKE_ACCELERATOR_LABEL: "nvidia-l4"}, "L4", 24, id="gke"),
        pytest.param({KARPENTER_NAME: "h100", KARPENTER_MEMORY: "81920"}, "H100", 80, id="karpenter"),
        pytest.param({KARPENTER_NAME: "a100", KARPENTER_MEMORY: "40960"}, "A100", 40, id="karpenter-a100"),
        pytest.param({"node.kubernetes.io/instance-type": "Standard_NC24ads_A100_v4"}, "A100", 80, id="aks-type"),
        pytest.param({"node.kubernetes.io/instance-type": "g5.xlarge"}, "A10G", 24, id="eks-type"),
        pytest.param(
            {gpus.GPU_PRODUCT_LABEL: "NVIDIA-H100", gpus.GPU_MEMORY_LABEL: "95830"}, "H100", 94, id="gfd-memory"
        ),
        pytest.param(
            {gpus.GPU_PRODUCT_LABEL: "NVIDIA-RTX-Unlisted", "node.kubernetes.io/instance-type": "p5.48xlarge"},
            "H100",
            80,
            id="unknown-product-known-type",
        ),
    ],
)
def test_from_node_labels(labels: dict[str, str], family: str, memory: int) -> None:
    got = from_node_labels(labels)
    assert (got.family, got.memory_gb) == (family, memory)


def test_node_labels_unknown_names_what_was_read() -> None:
    got = from_node_labels({gpus.GPU_PRODUCT_LABEL: "NVIDIA-RTX-Unlisted", "node.kubernetes.io/instance-type": "x1"})
    assert (got.family, got.source) == (UNKNOWN, "NVIDIA-RTX-Unlisted")
    assert from_node_labels({}).source == ""
    assert from_node_labels({"node.kubernetes.io/instance-type": "m5.large"}).source == "m5.large"


def test_model_keys() -> None:
    assert from_name("NVIDIA H100 NVL").model == "H100-NVL-94GB"
    assert from_name("NVIDIA H200").model == "H200-141GB"
    assert from_name("h100").model is None  # memory unknown: no catalog model is guessed
    required = {"H200", "GH200", "H100", "B200", "A100", "L40S", "L40", "L4", "A10G", "A10", "T4", "V100"}
    assert set(gpus.FAMILIES) >= required
