"""One pymx measurement per call, printed as a JSON line (what bench/run.py compares with peers).

    python bench/measure_pymx.py tiny_op [--ops 10000] [--device gpu] [--record]
    python bench/measure_pymx.py leafnet --mode train|infer --batch 64 [--hybridize] [--device gpu]
                                 [--dtype bfloat16]
    python bench/measure_pymx.py lstm --mode train|infer [--batch 32] [--hybridize] [--device gpu]
                                 [--profile STEPS]
    python bench/measure_pymx.py resnet --mode train|infer --batch 8 [--image-size 224]
                                 [--hybridize] [--device gpu] [--profile STEPS]
    python bench/measure_pymx.py transformer --mode train|infer [--batch 8] [--hybridize]
                                 [--device gpu] [--profile STEPS]

lstm: gluon.rnn.LSTM, 2 layers, hidden 256, input 128, 35 steps (layout TNC, zero begin states);
its training step is L2 loss on the outputs, backward and an SGD update. resnet: the model zoo's
resnet18_v1 (1000 classes); its training step is softmax cross-entropy, backward and SGD.
transformer: the BERT-like encoder of bench/transformer_model.py (2 layers, 256 units, 4 heads,
feed-forward 1024, sequence 128, vocabulary 8000, dropout 0.1 in training) classifying on the
first token, each sample's valid length drawn from [64, 128]; its training step is softmax
cross-entropy, backward and an Adam update. All in float32, samples/s;
bench/peers/{lstm,resnet,transformer}_torch.py and {lstm,resnet}_mxnet.py build the same models.
--profile STEPS prints where a step's time goes instead (pymx.profiler, per operator).
"""
import argparse
import json
import os
import sys
import time

import numpy as onp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pymx  # noqa: E402
from pymx import autograd, gluon, np, profiler  # noqa: E402
from pymx.gluon.model_zoo import vision  # noqa: E402

# The word-level language-model shape of the lstm case (the peers use the same).
LSTM_LAYERS, LSTM_HIDDEN, LSTM_INPUT, LSTM_STEPS = 2, 256, 128, 35


def tiny_op(ops, device, record):
    """Best of 5: µs per `x = x + 1` on shape (4,), `ops` pushes then one sync. Recording, each
    round starts again from the variable and frees its tape of `ops` nodes inside the timed
    region, as a training step does (rather than growing one tape over all rounds)."""
    variable = np.zeros((4,), device=device)
    if record:
        variable.attach_grad()
    best = float("inf")
    for _ in range(5):
        pymx.waitall()
        start = time.perf_counter()
        x = variable
        with autograd.record() if record else autograd.pause():
            for _ in range(ops):
                x = x + 1
        x.wait_to_read()
        del x  # the tape goes with the last result
        best = min(best, (time.perf_counter() - start) / ops * 1e6)
    return best


def model_step(net, x, y, loss_fn, mode, batch, hybridize, optimizer="sgd",
               learning_rate=0.01):
    """The step of the lstm, resnet and transformer cases: a training step (forward, loss,
    backward, `optimizer` update) or inference on `net`, whose input is `x` (a tuple: its
    inputs); it returns an array to wait on, written by the step's last op."""
    inputs = x if isinstance(x, tuple) else (x,)
    net(*inputs).wait_to_read()  # finish deferred initialisation before hybridizing
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    if mode == "infer":
        return lambda: net(*inputs)
    trainer = gluon.Trainer(net.collect_params(), optimizer, {"learning_rate": learning_rate})
    first_param = next(iter(net.collect_params().values()))

    def step():
        with autograd.record():
            loss = loss_fn(net(*inputs), y)
        loss.backward()
        trainer.step(batch)
        return first_param.data()

    return step


def profile_table(step, steps):
    """pymx.profiler's operators over `steps` steps (after 2 warm-up steps), per step: calls,
    ms, share of the operators' total, µs per call; headed by the wall time per step."""
    for _ in range(2):
        step().wait_to_read()
    pymx.waitall()
    profiler.dumps(reset=True)
    profiler.set_state("run")
    start = time.perf_counter()
    for _ in range(steps):
        step().wait_to_read()
    pymx.waitall()
    wall = (time.perf_counter() - start) / steps
    profiler.set_state("stop")
    entries = json.loads(profiler.dumps(format="json", reset=True))
    # A hybridized replay is one engine op, "graph", whose operators are profiled one by one as
    # well (Note [Bulk execution]): its span contains theirs, so it stays out of the sums.
    total = sum(e["total_ms"] for e in entries if e["name"] != "graph")
    calls = sum(e["count"] for e in entries if e["name"] != "graph")
    lines = [f"{wall * 1e3:.2f} ms per step (wall); operators: {calls / steps:.0f} calls, "
             f"{total / steps:.2f} ms per step (worker time)",
             "| operator | calls/step | ms/step | share | us/call |", "|---|---|---|---|---|"]
    for e in entries:
        lines.append(f"| {e['name']} | {e['count'] / steps:.0f} | {e['total_ms'] / steps:.2f} | "
                     f"{e['total_ms'] / total:.1%} | {e['avg_ms'] * 1e3:.1f} |")
    return "\n".join(lines)


def lstm_step(mode, batch, hybridize, device):
    net = gluon.rnn.LSTM(LSTM_HIDDEN, num_layers=LSTM_LAYERS, input_size=LSTM_INPUT)
    net.initialize(device=device)
    rng = onp.random.default_rng(0)
    x = np.array(rng.standard_normal((LSTM_STEPS, batch, LSTM_INPUT), dtype=onp.float32),
                 device=device)
    y = np.array(rng.standard_normal((LSTM_STEPS, batch, LSTM_HIDDEN), dtype=onp.float32),
                 device=device)
    return model_step(net, x, y, gluon.loss.L2Loss(), mode, batch, hybridize)


def resnet_step(mode, batch, image_size, hybridize, device):
    net = vision.resnet18_v1()
    net.initialize(device=device)
    rng = onp.random.default_rng(0)
    x = np.array(rng.random((batch, 3, image_size, image_size), dtype=onp.float32),
                 device=device)
    y = np.array(rng.integers(0, 1000, batch).astype(onp.float32), device=device)
    return model_step(net, x, y, gluon.loss.SoftmaxCrossEntropyLoss(), mode, batch, hybridize)


def transformer_step(mode, batch, hybridize, device):
    import transformer_model
    net = transformer_model.TransformerClassifier()
    net.initialize(device=device)
    rng = onp.random.default_rng(0)
    length = transformer_model.MAX_LENGTH
    tokens = np.array(rng.integers(0, transformer_model.VOCAB, (batch, length), dtype=onp.int32),
                      device=device)
    valid_length = np.array(rng.integers(length // 2, length + 1, batch, dtype=onp.int32),
                            device=device)
    y = np.array(rng.integers(0, transformer_model.CLASSES, batch).astype(onp.float32),
                 device=device)
    return model_step(net, (tokens, valid_length), y, gluon.loss.SoftmaxCrossEntropyLoss(), mode,
                      batch, hybridize, optimizer="adam", learning_rate=1e-4)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["tiny_op", "leafnet", "lstm", "resnet", "transformer"])
    parser.add_argument("--ops", type=int, default=10000)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--batch", type=int, default=None,
                        help="default: the batch of the model's bench/run.py case (leafnet 64, "
                             "lstm 32, resnet 8, transformer 8)")
    parser.add_argument("--hybridize", action="store_true")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", help="leafnet training: the net's dtype")
    parser.add_argument("--image-size", type=int, default=224, help="resnet: input height/width")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="lstm, resnet, transformer: print pymx.profiler's per-step operator table over "
                             "STEPS steps instead of measuring")
    args = parser.parse_args()
    if args.batch is None:
        args.batch = {"lstm": 32, "resnet": 8, "transformer": 8}.get(args.what, 64)
    device = pymx.gpu(0) if args.device in ("gpu", "cuda") else pymx.cpu(0)
    if args.what == "tiny_op":
        result = {"value": tiny_op(args.ops, device, args.record), "unit": "us/op"}
    elif args.what in ("lstm", "resnet", "transformer"):
        import leafnet_bench
        if args.what == "lstm":
            step = lstm_step(args.mode, args.batch, args.hybridize, device)
        elif args.what == "resnet":
            step = resnet_step(args.mode, args.batch, args.image_size, args.hybridize, device)
        else:
            step = transformer_step(args.mode, args.batch, args.hybridize, device)
        if args.profile:
            print(profile_table(step, args.profile))
            return
        # Timed as the LeafNetwork case: each step waits for its result.
        result = {"value": leafnet_bench._time(step, args.batch, args.seconds),
                  "unit": "samples/s"}
    else:
        import leafnet_bench
        if args.mode == "train":
            value = leafnet_bench.train_samples_per_s(args.batch, args.hybridize, args.seconds,
                                                      device, args.dtype)
        else:
            value = leafnet_bench.infer_samples_per_s(args.batch, args.hybridize, args.seconds,
                                                      device)
        result = {"value": value, "unit": "samples/s"}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
