"""kvstore 'dist_sync' / 'dist_device_sync' across processes, against NumPy float64 references.

Each test launches `mpiexec -n 2 python <this file> <scenario> <dir> <cpu|gpu>` (the mpiexec of
the `mpich` wheel, next to the Python running the tests); every rank runs `_run_<scenario>` and
writes what it saw to <dir>/<scenario>-rank<r>.npz, which the test compares. Rank r owns cpu(2r)
and cpu(2r+1) (both share gpu(0) in the GPU variant). A timeout on every launch turns a hang
into a failure.
"""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import sysconfig
import zlib

import numpy as onp
import pytest

from pymx import autograd, cpu, gpu, gluon, kvstore, np, optimizer as opt
from pymx.gluon import nn

from conftest import requires_gpu

requires_mpi = pytest.mark.skipif(importlib.util.find_spec('mpi4py') is None,
                                  reason="mpi4py is not installed (pip install 'pymx[dist]')")

TIMEOUT_S = 60
# (key, shape, dtype) of the values summed in the 'store' scenario.
STORE_KEYS = [(0, (3, 4), 'float32'), (1, (5,), 'float64'), ('c', (2, 2), 'int32'),
              (3, (6,), 'float16')]
# Per dtype (rtol, atol) of a sum of four values (|value| < 32) against the float64 sum: three
# roundings of half an ulp at 32 at most (float32: 6e-6, float16: 0.05).
TOLERANCES = {'float16': (1e-2, 5e-2), 'float32': (1e-6, 1e-5), 'float64': (1e-12, 1e-12),
              'int32': (0, 0)}
F32 = dict(zip(('rtol', 'atol'), TOLERANCES['float32']))
GLOBAL_BATCH, STEPS, LR = 8, 4, 0.1


def _values(key, rank, device_index, shape, dtype):
    """The value that `rank` puts on its device `device_index` for `key` (same in every process)."""
    rng = onp.random.default_rng([zlib.crc32(str(key).encode()), rank, device_index])
    return (rng.standard_normal(shape) * 4).astype(dtype)


def _sum_everywhere(key, shape, dtype):
    """The float64 sum of `key`'s values over 2 ranks x 2 devices."""
    return sum(_values(key, r, d, shape, dtype).astype('float64')
               for r in range(2) for d in range(2))


def _devices(rank):
    return [cpu(2 * rank), cpu(2 * rank + 1)]


def _on_devices(key, rank, shape, dtype, devices):
    return [np.array(_values(key, rank, i, shape, dtype), device=dev)
            for i, dev in enumerate(devices)]


# ---- what each rank runs ---------------------------------------------------------------------
def _run_store(kv, out, devices):
    rank = kv.rank
    out['rank_and_workers'] = onp.array([rank, kv.num_workers])
    values = [_on_devices(key, rank, shape, dtype, devices) for key, shape, dtype in STORE_KEYS]
    kv.pushpull([key for key, _, _ in STORE_KEYS], values)  # one call, four keys, four dtypes
    for (key, _, _), copies in zip(STORE_KEYS, values):
        for d, copy in enumerate(copies):
            out[f'pushpull_{key}_{d}'] = copy.asnumpy()
    kv.init('w', np.array(_values('w', rank, 0, (4,), 'float32')))
    pulled = [np.zeros((4,), device=dev) for dev in devices]
    kv.pull('w', out=pulled)
    out['init_pull'] = onp.stack([p.asnumpy() for p in pulled])
    kv.push('p', _on_devices('p', rank, (3,), 'float32', devices))
    target = np.zeros((3,), device=devices[1])
    kv.pull('p', out=target)
    out['push_pull'] = target.asnumpy()
    sources = _on_devices('q', rank, (3,), 'float32', devices)
    targets = [np.zeros((3,), device=dev) for dev in devices]
    kv.pushpull('q', sources, out=targets)
    out['pushpull_out'] = onp.stack([t.asnumpy() for t in targets])
    out['pushpull_out_sources'] = onp.stack([s.asnumpy() for s in sources])
    kv.barrier()
    # update_on_kvstore: each rank updates its own master with the same summed gradient.
    updating = kvstore.create('dist_device_sync')
    updating.set_optimizer(opt.create('sgd', learning_rate=LR))
    updating.init('u', np.array(_values('u', rank, 0, (5,), 'float32')))
    weights = [np.zeros((5,), device=dev) for dev in devices]
    updating.pushpull('u', _on_devices('g', rank, (5,), 'float32', devices), out=weights)
    out['updated'] = onp.stack([w.asnumpy() for w in weights])
    updating._barrier()


def _make_net(seed, devices):
    """Dense(4 -> 8, relu) -> Dense(3), weights drawn by NumPy from `seed`."""
    net = nn.HybridSequential()
    net.add(nn.Dense(8, in_units=4, activation='relu'), nn.Dense(3, in_units=8))
    net.initialize(device=devices)
    rng = onp.random.default_rng(seed)
    for _, param in sorted(net.collect_params().items()):
        param.set_data(np.array(rng.standard_normal(param.shape).astype('float32') * 0.5))
    return net


def _batches():
    rng = onp.random.default_rng(1234)
    return [(rng.standard_normal((GLOBAL_BATCH, 4)).astype('float32'),
             rng.standard_normal((GLOBAL_BATCH, 3)).astype('float32')) for _ in range(STEPS)]


def _train(net, trainer, devices, first, last):
    """STEPS SGD steps on samples [first, last) of each global batch, split over `devices`."""
    loss_fn = gluon.loss.L2Loss()
    for x, y in _batches():
        xs = gluon.utils.split_and_load(x[first:last], devices)
        ys = gluon.utils.split_and_load(y[first:last], devices)
        with autograd.record():
            losses = [loss_fn(net(xi), yi) for xi, yi in zip(xs, ys)]
        for loss in losses:
            loss.backward()
        trainer.step(GLOBAL_BATCH)  # the sum runs over all processes: normalise by the global batch
    return {name: p.data(devices[0]).asnumpy() for name, p in net.collect_params().items()}


def _trained_params(store, devices, first, last, seed, update_on_kvstore):
    net = _make_net(seed, devices)
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': LR, 'momentum': 0.9},
                            kvstore=store, update_on_kvstore=update_on_kvstore)
    return _train(net, trainer, devices, first, last)


def _run_train(kv, out, devices):
    rank, half = kv.rank, GLOBAL_BATCH // 2
    seed = 7 + rank  # rank 1 starts elsewhere: the Trainer must start it from rank 0's weights
    runs = {'dist_sync': ('dist_sync', devices[:1], False),
            'dist_device_sync': (kvstore.create('dist_device_sync'), devices, True)}
    for run, (store, run_devices, on_kvstore) in runs.items():
        params = _trained_params(store, run_devices, rank * half, (rank + 1) * half, seed,
                                 on_kvstore)
        for name, value in params.items():
            out[f'{run}/{name}'] = value


def _run_mismatch(kv, out, devices):
    rank = kv.rank
    messages = []
    try:
        kv.init('w', np.zeros((2, 3 + rank)))
    except ValueError as err:
        messages.append(str(err))
    try:
        kv.pushpull(['a', 'b'] if rank == 0 else ['a', 'c'], [np.ones((2,)), np.ones((2,))])
    except ValueError as err:
        messages.append(str(err))
    value = np.ones((2,))
    kv.pushpull('after', value)  # the store still works: nothing moved before the errors
    out['after'] = value.asnumpy()
    out['messages'] = onp.array(json.dumps(messages))


def _run_bfloat16(kv, out, devices):
    values = [np.array(_values('b', kv.rank, d, (7,), 'float32'), dtype='bfloat16', device=dev)
              for d, dev in enumerate(devices)]
    kv.pushpull('b', values)
    kv.init('wb', np.array(_values('wb', kv.rank, 0, (4,), 'float32'), dtype='bfloat16'))
    pulled = [np.zeros((4,), dtype='bfloat16', device=dev) for dev in devices]
    kv.pull('wb', out=pulled)
    out['pushpull'] = onp.stack([v.asnumpy() for v in values])
    out['init_pull'] = onp.stack([p.asnumpy() for p in pulled])
    out['is_bfloat16'] = onp.array([a.dtype == np.bfloat16 for a in values + pulled])


def _run_die(kv, out, devices):
    if kv.rank == 1:
        raise RuntimeError("rank 1 fails before its pushpull")
    kv.pushpull('k', np.ones((2,)))
    print("rank 0 finished", flush=True)


def _run_single(kv, out, devices):
    out['rank_and_workers'] = onp.array([kv.rank, kv.num_workers])
    values = _on_devices('s', 0, (3,), 'float32', devices)
    kv.pushpull('s', values)
    out['pushpull'] = onp.stack([v.asnumpy() for v in values])
    kv.barrier()


def _worker_main(scenario, directory, device_type):
    kv = kvstore.create('dist_sync')
    devices = _devices(kv.rank) if device_type == 'cpu' else [gpu(0), gpu(0)]
    out = {}
    globals()[f'_run_{scenario}'](kv, out, devices)
    onp.savez(os.path.join(directory, f'{scenario}-rank{kv.rank}.npz'), **out)


# ---- the tests -------------------------------------------------------------------------------
def _mpiexec():
    """The mpiexec of the mpich wheel that mpi4py uses: in the install scheme's data directory
    (a venv's bin, next to the interpreter; /usr/local/bin for a system Python)."""
    candidates = [os.path.join(os.path.dirname(sys.executable), 'mpiexec'),
                  os.path.join(sysconfig.get_path('data'), 'bin', 'mpiexec')]
    for path in candidates:
        if os.path.exists(path):
            return path
    raise AssertionError(f"no mpiexec at {' or '.join(candidates)}: pip install mpich")


def _launch(scenario, directory, num_workers=2, device_type='cpu'):
    """Runs the scenario under mpiexec (or alone with num_workers=None): (returncode, output)."""
    command = [sys.executable, __file__, scenario, str(directory), device_type]
    if num_workers is not None:
        command = [_mpiexec(), '-n', str(num_workers)] + command
    env = {**os.environ, 'OPENBLAS_NUM_THREADS': '1'}  # 2 ranks share the cores
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # mpiexec and every rank
        output, _ = proc.communicate()
        pytest.fail(f"{scenario}: no result after {TIMEOUT_S} s (a hang?)\n{output}")
    return proc.returncode, output


def _results(scenario, directory, num_workers=2, device_type='cpu'):
    returncode, output = _launch(scenario, directory, num_workers, device_type)
    assert returncode == 0, output
    return [dict(onp.load(directory / f'{scenario}-rank{r}.npz'))
            for r in range(num_workers or 1)]


@requires_mpi
@pytest.mark.parametrize('device_type', ['cpu', pytest.param('gpu', marks=requires_gpu)])
def test_push_pull_pushpull_init_across_processes(tmp_path, device_type):
    ranks = _results('store', tmp_path, device_type=device_type)
    for rank, got in enumerate(ranks):
        assert got['rank_and_workers'].tolist() == [rank, 2]
        for key, shape, dtype in STORE_KEYS:
            rtol, atol = TOLERANCES[dtype]
            for d in range(2):
                value = got[f'pushpull_{key}_{d}']
                assert value.dtype == dtype and value.shape == shape
                onp.testing.assert_allclose(value, _sum_everywhere(key, shape, dtype),
                                            rtol=rtol, atol=atol, err_msg=f"rank {rank} key {key}")
        for row in got['init_pull']:  # every worker ends with rank 0's value
            onp.testing.assert_array_equal(row, _values('w', 0, 0, (4,), 'float32'))
        onp.testing.assert_allclose(got['push_pull'], _sum_everywhere('p', (3,), 'float32'), **F32)
        for row in got['pushpull_out']:
            onp.testing.assert_allclose(row, _sum_everywhere('q', (3,), 'float32'), **F32)
        for d, row in enumerate(got['pushpull_out_sources']):  # out= leaves the values alone
            onp.testing.assert_array_equal(row, _values('q', rank, d, (3,), 'float32'))
        expected = (_values('u', 0, 0, (5,), 'float32').astype('float64')
                    - LR * _sum_everywhere('g', (5,), 'float32'))
        for row in got['updated']:
            onp.testing.assert_allclose(row, expected, **F32)
    onp.testing.assert_array_equal(ranks[0]['updated'], ranks[1]['updated'])


@requires_mpi
def test_trainer_dist_matches_one_process_over_the_whole_batch(tmp_path):
    ranks = _results('train', tmp_path)
    for run, on_kvstore in [('dist_sync', False), ('dist_device_sync', True)]:
        # One process, the whole batch split over 2 devices, rank 0's initial weights.
        reference = _trained_params('device', [cpu(0), cpu(1)], 0, GLOBAL_BATCH, seed=7,
                                    update_on_kvstore=on_kvstore)
        for name, value in reference.items():
            # float32; the dist runs add the per-device gradients in another order.
            onp.testing.assert_allclose(ranks[0][f'{run}/{name}'], value, rtol=1e-5, atol=1e-6,
                                        err_msg=f"{run} {name}")
            # The ranks apply the same update to the same sum: identical bits.
            onp.testing.assert_array_equal(ranks[1][f'{run}/{name}'], ranks[0][f'{run}/{name}'],
                                           err_msg=f"{run} {name}")
        initial = _make_net(7, [cpu(0)]).collect_params()
        assert any(not onp.allclose(initial[name].data().asnumpy(), value)
                   for name, value in reference.items()), "the training run did not train"


@requires_mpi
def test_bfloat16_sums_and_broadcasts_across_processes(tmp_path):
    """MPI has no bfloat16: values travel as float32. A rank adds its devices' copies in bfloat16,
    the ranks' sums are added in float32 and rounded once: two roundings (2^-8 each) of at most
    the sum of the magnitudes. The broadcast of init is exact."""
    def rounded(key, rank, d, shape):
        return np.array(_values(key, rank, d, shape, 'float32'), dtype='bfloat16').asnumpy()

    terms = [rounded('b', r, d, (7,)).astype('float64') for r in range(2) for d in range(2)]
    bound = 2 * 2.0 ** -8 * sum(onp.abs(t) for t in terms)
    for got in _results('bfloat16', tmp_path):
        assert got['is_bfloat16'].all()
        for row in got['pushpull']:
            assert (onp.abs(row - sum(terms)) <= bound).all(), (row, sum(terms))
        for row in got['init_pull']:
            onp.testing.assert_array_equal(row, rounded('wb', 0, 0, (4,)))


@requires_mpi
def test_shape_mismatch_across_processes_raises_on_every_rank(tmp_path):
    for got in _results('mismatch', tmp_path):
        init_error, keys_error = json.loads(str(got['messages']))
        assert init_error == ("KVStore 'dist_sync': init of key 'w' has shape (2, 3) float32 on "
                              "rank 0 but shape (2, 4) float32 on rank 1; every worker must use "
                              "the same shape and dtype for a key")
        assert keys_error == ("KVStore 'dist_sync': rank 0 called pushpull with keys ['a', 'b'] "
                              "but rank 1 called pushpull with keys ['a', 'c']; every worker must "
                              "make the same kvstore calls with the same keys in the same order")
        onp.testing.assert_array_equal(got['after'], [2.0, 2.0])


@requires_mpi
def test_uncaught_exception_on_one_rank_ends_the_job(tmp_path):
    returncode, output = _launch('die', tmp_path)
    assert returncode != 0, output
    assert "rank 1 fails before its pushpull" in output
    assert "rank 0 finished" not in output


@requires_mpi
def test_without_mpiexec_the_store_is_one_worker(tmp_path):
    (got,) = _results('single', tmp_path, num_workers=None)
    assert got['rank_and_workers'].tolist() == [0, 1]
    expected = sum(_values('s', 0, d, (3,), 'float32').astype('float64') for d in range(2))
    for row in got['pushpull']:
        onp.testing.assert_allclose(row, expected, **F32)


def test_missing_mpi4py_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, 'mpi4py', None)  # `import mpi4py` now fails
    with pytest.raises(ImportError, match=r"pip install 'pymx\[dist\]'"):
        kvstore.create('dist_sync')


def test_async_and_unknown_dist_types_are_rejected():
    with pytest.raises(ValueError, match="asynchronous updates need a parameter server"):
        kvstore.create('dist_async')
    with pytest.raises(ValueError, match="Unknown KVStore type 'dist_foo'"):
        kvstore.create('dist_foo')


if __name__ == '__main__':
    _worker_main(*sys.argv[1:])
