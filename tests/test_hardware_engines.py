"""hardware.copy_engine_count: the driver's copy engine count, None where no driver answers."""

import ctypes

import pytest

from helpers import hardware


def _has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_has_driver(), reason="this machine has a CUDA driver")
def test_no_cuda_driver_gives_none():
    assert hardware.copy_engine_count() is None
    assert hardware.copy_engine_count(3) is None


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True, None])
def test_a_bad_device_is_refused_before_the_driver_is_asked(bad):
    with pytest.raises((ValueError, TypeError), match="device"):
        hardware.copy_engine_count(bad)


def test_a_driver_that_fails_a_call_gives_none(monkeypatch):
    class Driver:
        """libcuda whose cuInit succeeds, and whose device query fails as for a missing GPU."""

        def __init__(self, fail_at: str) -> None:
            self.fail_at = fail_at

        def __getattr__(self, name):
            return lambda *args: 100 if name == self.fail_at else 0

    for fail_at in ("cuInit", "cuDeviceGet", "cuDeviceGetAttribute"):
        monkeypatch.setattr(ctypes, "CDLL", lambda path, fail_at=fail_at: Driver(fail_at))
        assert hardware.copy_engine_count(0) is None, fail_at


def test_a_driver_that_answers_gives_its_count(monkeypatch):
    class Driver:
        def cuInit(self, flags):
            return 0

        def cuDeviceGet(self, handle, ordinal):
            handle._obj.value = ordinal
            return 0

        def cuDeviceGetAttribute(self, value, attribute, handle):
            assert attribute == 40  # CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT
            value._obj.value = 3 if handle.value == 1 else 2
            return 0

    def load(path):  # the dynamic loader's names are case-sensitive
        if path != "libcuda.so.1":
            raise OSError(f"{path}: cannot open shared object file")
        return Driver()

    monkeypatch.setattr(ctypes, "CDLL", load)
    assert hardware.copy_engine_count(1) == 3
    assert hardware.copy_engine_count() == 2
