"""The tutorial's LeafNetwork (sections 7 and 8): data-parallel training on [cpu(0), cpu(1)]
gives the parameters of single-device training on the same batches; loading onto a device;
summary; the tutorial's training loop."""
import numpy as onp

from pymx import autograd, cpu, gluon, np
from pymx._train import LeafNetwork  # the tutorial's code (also run verbatim by test_examples.py)


def _batches(num, batch_size, size=32, seed=0):
    rng = onp.random.default_rng(seed)
    return [(rng.standard_normal((batch_size, 3, size, size)).astype('float32'),
             rng.integers(0, 2, batch_size).astype('float32')) for _ in range(num)]


def _trained_params(net, devices, batches, hybridize, accumulate_on_one_device=False):
    if hybridize:
        net.hybridize()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.05})
    if accumulate_on_one_device:
        net.collect_params().setattr('grad_req', 'add')
    for data, label in batches:
        # The single-device reference runs the same halves one after the other, so batch norm
        # sees the same per-device batches; its gradients accumulate ('add').
        targets = [devices[0]] * 2 if accumulate_on_one_device else devices
        data_list = gluon.utils.split_and_load(data, targets)
        label_list = gluon.utils.split_and_load(label, targets)
        with autograd.record():
            outputs = [net(X) for X in data_list]
            losses = [loss_fn(output, y) for output, y in zip(outputs, label_list)]
        for loss in losses:
            loss.backward()
        trainer.step(len(data))
        if accumulate_on_one_device:
            net.zero_grad()
    return {k: p.list_data()
            for k, p in net.collect_params().items() if p.grad_req != 'null'}


def _identical_nets(path, devices_b):
    net_a = LeafNetwork(dropout=0)
    net_a.initialize(device=cpu(0))
    net_a(np.zeros((2, 3, 32, 32)))
    net_a.save_parameters(path)
    net_b = LeafNetwork(dropout=0)
    net_b.load_parameters(path, device=devices_b)
    return net_a, net_b


def test_two_devices_match_one_device(tmp_path):
    batches = _batches(3, 4)
    path = str(tmp_path / 'leaf.params')
    for hybridize in (False, True):
        single, multi = _identical_nets(path, [cpu(0), cpu(1)])
        ref = _trained_params(single, [cpu(0)], batches, hybridize, accumulate_on_one_device=True)
        got = _trained_params(multi, [cpu(0), cpu(1)], batches, hybridize)
        for name, (expected,) in ref.items():
            copy0, copy1 = got[name]
            assert copy1.device == cpu(1)
            onp.testing.assert_array_equal(copy0.asnumpy(), copy1.asnumpy(), err_msg=name)
            onp.testing.assert_allclose(copy0.asnumpy(), expected.asnumpy(), rtol=1e-4,
                                        atol=1e-5, err_msg=name)


def test_tutorial_sections_7_and_8(tmp_path, capsys):
    net = LeafNetwork()
    net.initialize()
    net.summary(np.ones((4, 3, 128, 128)))
    table = capsys.readouterr().out
    assert 'Conv2D-1' in table and 'Dense-' in table and '(4, 2)' in table
    assert 'Total params: ' in table
    path = str(tmp_path / 'leaf_models.params')
    net.save_parameters(path)

    gpu = cpu(1)  # section 7.1 with cpu(1) standing in for the GPU
    net = LeafNetwork()
    net.load_parameters(path, device=gpu)
    x = np.random.uniform(size=(1, 3, 128, 128), device=gpu)
    assert net(x).device == gpu and net(x).shape == (1, 2)
    net.collect_params().reset_device(cpu(0))
    assert net(x.to_device(cpu(0))).device == cpu(0)

    # Section 8.3: the tutorial's training loop on two devices (small images, 2 batches).
    devices = [cpu(0), cpu(1)]
    net.initialize(force_reinit=True, device=devices)
    batch_size = 4
    images, labels = zip(*_batches(2, batch_size, size=128))
    dataset = gluon.data.ArrayDataset(onp.concatenate(images), onp.concatenate(labels))
    train_loader = gluon.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.001})
    accuracy = gluon.metric.Accuracy()
    train_loss = 0.
    for idx, batch in enumerate(train_loader):
        data, label = batch[0], batch[1]
        data_list = gluon.utils.split_and_load(data, devices)
        label_list = gluon.utils.split_and_load(label, devices)
        with autograd.record():
            outputs = [net(X) for X in data_list]
            losses = [loss_fn(output, label) for output, label in zip(outputs, label_list)]
        for l in losses:
            l.backward()
        trainer.step(batch_size)
        train_loss += sum([float(l.sum()) for l in losses])
        accuracy.update(label_list, outputs)
    _, acc = accuracy.get()
    assert 0.0 <= acc <= 1.0 and accuracy.num_inst == 8
    assert onp.isfinite(train_loss)
    weight = net.dense3.weight
    onp.testing.assert_array_equal(weight.data(cpu(0)).asnumpy(), weight.data(cpu(1)).asnumpy())
