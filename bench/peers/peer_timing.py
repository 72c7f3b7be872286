"""The timing loop the peers of bench/run.py share (lstm_*, resnet_*, and mxnet_gluon's)."""
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
