"""The timing loop the peers of bench/run.py share (lstm_*, resnet_*, and mxnet_gluon's), and the
PyTorch peers' training or inference step."""
import time


def samples_per_second(step, batch, seconds, warmup, finish=lambda: None):
    """Samples per second of step() (one batch each) after `warmup` untimed calls, over at least
    `seconds` and at least one call; finish() waits for work still in flight."""
    for _ in range(warmup):
        step()
    finish()
    iters, start = 0, time.perf_counter()
    while True:
        step()
        iters += 1
        if time.perf_counter() - start >= seconds:
            break
    finish()
    return iters * batch / (time.perf_counter() - start)


def torch_step(net, x, loss_of_output, opt, mode, device):
    """One PyTorch step as pymx's benchmarks time it: a training step (zero_grad, forward, the
    loss of the output, backward, SGD update) or a forward pass under no_grad, waited for on a
    GPU."""
    import torch

    def step():
        if mode == "train":
            net.train()
            opt.zero_grad(set_to_none=True)
            loss_of_output(net(x)).backward()
            opt.step()
        else:
            net.eval()
            with torch.no_grad():
                net(x)
        if device.type == "cuda":
            torch.cuda.synchronize()

    return step
