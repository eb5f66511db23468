"""dcgm-exporter's series as the cost model's GPU utilization: settings, attribution, units, what is ignored."""

from __future__ import annotations

import pytest
from statictrain import dcgm
from statictrain.cost import PodInfo, Sample, Window
from statictrain_operator.cost.inputs import DCGM_UTIL, build_usage, dcgm_utilization, usage_queries
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.prom import Series

WINDOW = Window(1000.0, 1100.0)
WORKER = PodInfo("uid-new", "w-0", "ns", "j", "n1", 1, started=990.0)
EARLIER = PodInfo("uid-old", "w-0", "ns", "j", "n1", 1, started=900.0, finished=980.0)


def series(samples: list[tuple[float, float]], **labels: str) -> Series:
    base = {"gpu": "0", "UUID": "GPU-a", "modelName": "H100", "Hostname": "n1", "container": "c"}
    return Series({k: v for k, v in {**base, **labels}.items() if v}, tuple(Sample(t, v) for t, v in samples))


def test_percent_becomes_a_ratio_and_each_sample_goes_to_the_pod_alive_then() -> None:
    s = series([(950.0, 40.0), (985.0, 0.0), (995.0, 80.0), (1050.0, 2.0), (1100.0, 9.0)], namespace="ns", pod="w-0")
    util, ignored = dcgm_utilization(WINDOW, [s], [WORKER, EARLIER], dcgm.DcgmSettings(source="dcgm"))
    assert util == {
        "uid-old": {"GPU-a": [Sample(950.0, 0.4)]},
        "uid-new": {"GPU-a": [Sample(995.0, 0.8), Sample(1050.0, 0.02)]},
    }
    assert ignored == {}  # the sample at the window's end belongs to the next window; 985 s: between the two pods


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ({"namespace": "ns"}, dcgm.NO_POD_LABELS),
        ({"namespace": "", "pod": "w-0"}, dcgm.NO_POD_LABELS),
        ({"namespace": "other", "pod": "w-0"}, dcgm.NOT_A_WORKER),
        ({"namespace": "ns", "pod": "w-0", "gpu": "", "UUID": ""}, dcgm.NO_GPU_LABEL),
    ],
)
def test_a_series_that_cannot_be_attributed_is_ignored_and_counted(labels: dict[str, str], reason: str) -> None:
    util, ignored = dcgm_utilization(WINDOW, [series([(1000.0, 0.0)], **labels)], [WORKER], dcgm.DcgmSettings())
    assert (util, ignored) == ({}, {reason: 1})


def test_samples_of_an_earlier_pod_of_the_same_name_are_not_the_worker_s() -> None:
    s = series([(900.0, 0.0), (960.0, 0.0)], namespace="ns", pod="w-0")
    assert dcgm_utilization(WINDOW, [s], [WORKER], dcgm.DcgmSettings()) == ({}, {dcgm.OUTSIDE_POD_LIFETIME: 1})


def test_renamed_labels_and_a_ratio_metric() -> None:
    settings = dcgm.DcgmSettings(pod_label="exported_pod", namespace_label="exported_namespace",
                                 utilization_unit="ratio")  # fmt: skip
    s = series([(1000.0, 0.5)], exported_namespace="ns", exported_pod="w-0", namespace="gpu-operator", pod="dcgm-x")
    assert dcgm_utilization(WINDOW, [s], [WORKER], settings)[0] == {"uid-new": {"GPU-a": [Sample(1000.0, 0.5)]}}


def test_the_source_decides_which_gpu_series_are_read() -> None:
    def keys(source: str) -> set[str]:
        return set(usage_queries(WINDOW, 600.0, gpu=dcgm.DcgmSettings(source=source)))

    assert {"util", "idle"} <= keys("sidecar") and DCGM_UTIL not in keys("sidecar")
    assert DCGM_UTIL in keys("dcgm") and not {"util", "idle"} & keys("dcgm")
    assert {"util", "idle", DCGM_UTIL} <= keys("auto")
    assert usage_queries(WINDOW, 600.0, gpu=dcgm.DcgmSettings(source="dcgm", utilization_metric="my_util"))[
        DCGM_UTIL][0].startswith("my_util[")  # fmt: skip
    only = usage_queries(WINDOW, 600.0, gpu=dcgm.DcgmSettings(source="dcgm", scrape_job="dcgm-exporter"))
    assert only[DCGM_UTIL][0].startswith('DCGM_FI_DEV_GPU_UTIL{job="dcgm-exporter"}[')


def test_auto_keeps_a_pod_s_sidecar_utilization() -> None:
    sidecar = Series({"pod_uid": "uid-new", "gpu_uuid": "GPU-a"}, (Sample(1000.0, 0.9),))
    usage = build_usage(WINDOW, {"util": [sidecar]}, dcgm_util={"uid-new": {"GPU-a": [Sample(1000.0, 0.0)]},
                                                               "uid-2": {"GPU-b": [Sample(1000.0, 0.3)]}})  # fmt: skip
    assert usage["uid-new"].utilization == {"GPU-a": [Sample(1000.0, 0.9)]}
    assert usage["uid-2"].utilization == {"GPU-b": [Sample(1000.0, 0.3)]}


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"STATICTRAIN_DCGM_SOURCE": "nvml"}, "STATICTRAIN_DCGM_SOURCE"),
        ({"STATICTRAIN_DCGM_UTILIZATION_UNIT": "%"}, "STATICTRAIN_DCGM_UTILIZATION_UNIT"),
        ({"STATICTRAIN_DCGM_POD_LABEL": ""}, "STATICTRAIN_DCGM_POD_LABEL"),
        ({"STATICTRAIN_COST_DCGM": "true"}, "STATICTRAIN_DCGM_"),
    ],
)
def test_bad_settings_name_what_to_fix(env: dict[str, str], names: str) -> None:
    with pytest.raises(ValueError, match=names):
        CostSettings.from_env(env)


def test_settings_from_the_environment() -> None:
    s = CostSettings.from_env({"STATICTRAIN_DCGM_SOURCE": "auto", "STATICTRAIN_DCGM_UUID_LABEL": "uuid"}).dcgm
    assert (s.source, s.uuid_label, s.utilization_metric) == ("auto", "uuid", "DCGM_FI_DEV_GPU_UTIL")
    assert CostSettings.from_env({}).dcgm == dcgm.DcgmSettings()
