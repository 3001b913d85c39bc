"""Fixtures of the Python package's tests: the default model (skipped when
it is not cached) and the kvik command to compare with ($KVIK_BIN, else the
repository's build/kvik)."""

import os
import subprocess

import pytest

import kvik

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def model_path():
    d = os.environ.get("KVIK_MODELS") or os.path.join(os.path.expanduser("~"), ".cache", "kvik", "models")
    return os.path.join(d, MODEL_FILE)


@pytest.fixture(scope="session")
def path():
    p = model_path()
    if not os.path.exists(p):
        pytest.skip("default model not cached; run `make model`")
    return p


@pytest.fixture(scope="session")
def model(path):
    # F32 K/V rows, as `kvik run` keeps them, so greedy text matches it
    m = kvik.Model(path, kv_type="f32", kv_mem_mib=48, n_threads=2, max_seqs=4)
    yield m
    m.close()


class Cli:
    def __init__(self, exe):
        self.exe = exe

    def __call__(self, *args):
        r = subprocess.run([self.exe] + list(args), capture_output=True, timeout=300)
        assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
        return r.stdout.decode("utf-8")


@pytest.fixture(scope="session")
def cli():
    exe = os.environ.get("KVIK_BIN") or os.path.join(ROOT, "build", "kvik")
    if not os.path.exists(exe):
        pytest.skip("no kvik command to compare with (make, or set KVIK_BIN)")
    return Cli(exe)
