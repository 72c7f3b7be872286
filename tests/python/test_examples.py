import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_gpu_crash_course_runs_on_the_cpu_path(tmp_path):
    script = os.path.join(REPO, "examples", "gpu_crash_course.py")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")       # the tutorial's no-GPU fallback
    result = subprocess.run([sys.executable, script, "--quick", "--workdir", str(tmp_path)],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    # sections 2-7: GPU count, arrays on the fallback device, a forward pass of LeafNetwork
    lines = out.splitlines()
    assert "0" in lines                                   # print(npx.num_gpus())
    assert "Using 2 GPUs" in out                          # 8.3 with cpu(0), cpu(1)
    for epoch in (1, 2):
        assert f"[Epoch {epoch}] training: accuracy=" in out
        assert f"[Epoch {epoch}] validation: validation accuracy=" in out
    assert "test accuracy=" in out
    assert "nan" not in out                               # every run trained on batches
    assert (tmp_path / "leaf_models.params").exists()
    assert sorted(os.listdir(tmp_path / "datasets")) == ["leafdata.json", "test", "train",
                                                         "validation"]
