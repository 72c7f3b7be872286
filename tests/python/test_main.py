import os
import subprocess
import sys

import pytest

import pymx
from pymx import _train
from pymx.__main__ import parse_devices



def test_parse_devices():
    assert parse_devices("cpu(0),cpu(1)") == [pymx.cpu(0), pymx.cpu(1)]
    assert parse_devices("gpu(1)") == [pymx.gpu(1)]
    assert parse_devices("gpu:0, cpu 2") == [pymx.gpu(0), pymx.cpu(2)]
    with pytest.raises(ValueError, match="cannot parse 'tpu0'"):
        parse_devices("cpu(0),tpu0")


def test_main_trains_one_epoch_on_a_tiny_generated_set(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pymx", "--data-dir", str(tmp_path / "data"),
           "--train-images", "16", "--epochs", "1", "--batch-size", "4",
           "--devices", "cpu(0),cpu(1)", "--output-dir", str(out), "--num-workers", "1",
           "--hybridize"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    stdout = result.stdout
    assert "Using devices: cpu(0), cpu(1)" in stdout
    assert "[Epoch 1] training: loss=" in stdout
    assert "[Epoch 1] validation: validation accuracy=" in stdout
    assert "samples/s" in stdout and "Test accuracy: " in stdout
    assert "epoch 1/1" in result.stderr                       # the tqdm progress bar
    params = out / "leaf_models.params"
    plot = out / "training_curves.png"
    assert params.stat().st_size > 100_000                    # ~2.3M float32 parameters
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    net = _train.LeafNetwork()
    net.load_parameters(str(params), device=pymx.cpu())
    assert net(pymx.np.zeros((1, 3, 128, 128))).shape == (1, 2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_main_trains_under_amp(tmp_path, dtype):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pymx", "--data-dir", str(tmp_path / "data"),
           "--train-images", "8", "--epochs", "1", "--batch-size", "4",
           "--devices", "cpu(0),cpu(1)", "--output-dir", str(out), "--num-workers", "0",
           "--no-progress", "--amp", dtype]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Automatic mixed precision: {dtype}" in result.stdout
    assert "[Epoch 1] training: loss=" in result.stdout
    # float16 starts at 2**16 and halves on each overflowing step; bfloat16 is not scaled.
    scale = float(result.stdout.split("Loss scale: ")[1].split()[0])
    assert (scale == 1.0) if dtype == "bfloat16" else (2.0 ** 10 <= scale <= 2.0 ** 16)
    net = _train.LeafNetwork()
    net.load_parameters(str(out / "leaf_models.params"), device=pymx.cpu())  # float32
    assert all(p.dtype == "float32" for p in net.collect_params().values())


@pytest.mark.parametrize("argv,message", [
    (["--train-images", "8", "--batch-size", "16"],
     "--batch-size 16 must be between 1 and the number of training images (8)"),
    (["--epochs", "0"], "--epochs 0 must be at least 1"),
    (["--num-workers", "-2"], "--num-workers -2 must be 0 or more"),
    (["--lr", "-0.5"], "--lr -0.5 must be positive"),
    (["--optimizer", "nosuch"], "Cannot find optimizer 'nosuch'"),
    (["--devices", "cpu(0),tpu0"], "--devices: cannot parse 'tpu0'"),
    (["--devices", "cpu(0),gpu(99)"], "--devices: gpu(99) not found"),
    (["--devices", "cpu(1),cpu(0),cpu(1)"], "--devices: cpu(1) is listed twice"),
    (["--amp", "float64"], "--amp: invalid choice: 'float64'"),
])
def test_main_rejects_bad_arguments_before_generating_data(argv, message, capsys, tmp_path):
    from pymx.__main__ import main
    with pytest.raises(SystemExit) as exit_info:
        main(argv + ["--data-dir", str(tmp_path / "data")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_data_workers_default_to_none_on_cpus_and_some_with_gpus():
    from pymx.__main__ import _default_num_workers
    assert _default_num_workers([pymx.cpu(0), pymx.cpu(1)]) == 0
    with_gpu = _default_num_workers([pymx.gpu(0)])
    assert 1 <= with_gpu <= 4 and with_gpu <= max(1, os.cpu_count() // 2)
