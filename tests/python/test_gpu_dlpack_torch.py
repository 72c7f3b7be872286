"""DLPack between pymx GPU arrays and PyTorch CUDA tensors: exports wait for pymx's pending
work and are released only after the consumer's stream has read them; imports are zero-copy,
ordered after torch's stream, and keep torch's memory alive. Skipped without a GPU, or without
torch built for CUDA."""
import numpy as onp
import pytest

from pymx import np, npx
from pymx.device import gpu, num_gpus

if num_gpus() == 0:  # before torch: on a machine without a GPU that is the reason
    pytest.skip("no GPU visible", allow_module_level=True)
torch = pytest.importorskip("torch", reason="torch not installed")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch without CUDA")

DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_export_to_torch_waits_and_shares(dtype):
    values = (onp.arange(12) % 3).astype(dtype).reshape(3, 4)
    x = np.array(values, device=gpu(0)).copy()  # pending work: the export must wait for it
    t = torch.from_dlpack(x)
    assert t.is_cuda and t.device.index == 0 and t.data_ptr() == x._data_address()
    assert str(t.dtype).endswith({"bool": "bool"}.get(dtype, dtype))
    onp.testing.assert_array_equal(t.cpu().numpy(), values)


def test_export_views_empty_and_0d():
    x = np.array(onp.arange(12, dtype="float32").reshape(3, 4), device=gpu(0))
    row = torch.from_dlpack(x[1])  # a view: byte offset folded into the data pointer
    assert row.tolist() == [4.0, 5.0, 6.0, 7.0]
    empty = torch.from_dlpack(np.zeros((0, 3), device=gpu(0)))
    assert empty.shape == (0, 3) and empty.is_cuda
    scalar = torch.from_dlpack(np.array(2.5, device=gpu(0)))
    assert scalar.item() == 2.5


def test_import_from_torch_is_zero_copy_and_ordered():
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # torch's work on a non-default stream: the export must order it
        t = torch.empty(1 << 22, device="cuda")
        torch.cuda._sleep(20_000_000)
        t.fill_(3.0)
        y = np.from_dlpack(t)
    assert y.device == gpu(0) and y._data_address() == t.data_ptr()
    assert float(y.sum()) == 3.0 * (1 << 22)
    y[:] = 5.0  # a pymx write; after its wait, torch sees it
    y.wait_to_read()
    assert t[-1].item() == 5.0


@pytest.mark.parametrize("tdtype", [torch.float16, torch.bool, torch.int64])
def test_import_dtypes(tdtype):
    t = torch.ones(5, dtype=tdtype, device="cuda")
    y = np.from_dlpack(t)
    assert y.asnumpy().tolist() == t.cpu().tolist()


def test_import_strided_cuda_tensors_are_gathered_on_the_gpu():
    t = torch.arange(24.0, device="cuda").reshape(4, 6)
    # (torch has no negative strides: its flip is a contiguous copy, imported as it is)
    for view in (t.t(), t[:, ::2], t[1:3, 2:5], t[::2, 1::3], t[:, :1].expand(4, 6)):
        y = np.from_dlpack(view)
        assert y.device == gpu(0) and y._data_address() != view.data_ptr()
        onp.testing.assert_array_equal(y.asnumpy(), view.cpu().numpy())
    with pytest.raises(BufferError, match="copy=False"):
        np.from_dlpack(t.t(), copy=False)


def test_import_keeps_torch_memory_until_the_pymx_array_dies():
    t = torch.arange(1000.0, device="cuda")
    y = np.from_dlpack(t)
    del t  # the pymx array holds the producer's tensor: torch must not hand its block out
    others = [torch.full((1000,), -1.0, device="cuda") for _ in range(8)]
    assert y.asnumpy()[999] == 999.0 and (y * 2).asnumpy()[999] == 1998.0
    held = torch.cuda.memory_allocated()
    del y
    npx.waitall()  # the release runs (queued for this thread, run at the next bytecode)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() < held, "the imported tensor was never released"
    del others


def test_exported_memory_is_not_reused_while_torch_still_reads_it():
    """The export remembers torch's stream: when torch drops the tensor, pymx waits for the
    work queued there before its allocator hands the block out again."""
    n = 1 << 20
    npx.waitall()
    gpu(0).empty_cache()  # x's block will be the only cached one of its size: z must get it
    x = np.ones((n,), device=gpu(0))
    x.wait_to_read()
    address = x._data_address()
    t = torch.from_dlpack(x)
    del x
    torch.cuda._sleep(200_000_000)  # ~0.1 s of work queued ahead on torch's (legacy) stream
    c = t.clone()                  # reads the exported memory after the sleep
    del t                          # the DLPack deleter runs now: pymx frees the block
    z = np.zeros((n,), device=gpu(0))  # same size on the same pymx stream
    z.wait_to_read()
    torch.cuda.synchronize()
    assert z._data_address() == address, "the allocator did not hand the block out again"
    assert c.sum().item() == n, "pymx reused the exported block while torch still read it"
