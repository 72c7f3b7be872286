"""BatchProcessor: what the Estimator does with one batch, in training (fit_batch) and in
validation (evaluate_batch). Subclass it, or pass any object with both methods, to change how a
batch is split, fed to the network or turned into a loss."""
from .... import autograd
from ...utils import split_and_load

__all__ = ['BatchProcessor']


class BatchProcessor:
    """The default: the batch is (data, label), split along `batch_axis` over
    ``estimator.device`` with gluon.utils.split_and_load (one slice per device)."""

    @staticmethod
    def _get_data_and_label(batch, devices, batch_axis=0):
        if not isinstance(batch, (list, tuple)) or len(batch) < 2:
            raise ValueError(f"BatchProcessor: a batch must be a (data, label) pair, got "
                             f"{type(batch).__name__} {batch!r:.80}")
        data = split_and_load(batch[0], devices, batch_axis=batch_axis)
        label = split_and_load(batch[1], devices, batch_axis=batch_axis)
        return data, label

    def evaluate_batch(self, estimator, val_batch, batch_axis=0):
        """Runs estimator.val_net and estimator.val_loss on each device's slice; returns
        (data, label, pred, loss), each a list with one array per device."""
        data, label = self._get_data_and_label(val_batch, estimator.device, batch_axis)
        pred = [estimator.val_net(x) for x in data]
        loss = [estimator.val_loss(y_hat, y) for y_hat, y in zip(pred, label)]
        return data, label, pred, loss

    def fit_batch(self, estimator, train_batch, batch_axis=0):
        """Forward under autograd.record and backward on each device's slice (the optimizer
        step is GradientUpdateHandler's); returns (data, label, pred, loss) as lists with one
        array per device."""
        data, label = self._get_data_and_label(train_batch, estimator.device, batch_axis)
        with autograd.record():
            pred = [estimator.net(x) for x in data]
            loss = [estimator.loss(y_hat, y) for y_hat, y in zip(pred, label)]
        for value in loss:
            value.backward()
        return data, label, pred, loss
