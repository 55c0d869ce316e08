"""The rows of a fit in memory, served a whole mini-batch at a time.

skorch's default ``Dataset`` + ``DataLoader`` fetch every row with its own ``__getitem__`` call
and stack the rows again in ``collate``: for the small tabular networks sklmoo fits, that
Python work per row costs as much as the arithmetic of the step. :class:`RowData` holds ``X``,
the targets and their weights as tensors sharing the arrays' memory, and :class:`RowBatches`
gathers a batch with one indexing call per array. The order is the one a ``DataLoader`` with
the same generator would give (one draw for its workers' base seed, then ``randperm``, drawn
twice as ``RandomSampler`` does), so a
fit is the same whichever of the two serves it; any other ``iterator_train`` /
``iterator_valid`` setting falls back to the ``DataLoader``, which uses ``__getitem__``.
"""

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

#: the target of a batch without targets (prediction), as skorch's ``Dataset`` gives it
_NO_TARGET = torch.zeros(0)


class RowData(Dataset):
    """``X`` (n, ...), optional targets ``y`` (n, ...) and their weights (the shape of ``y``).

    A batch is ``(X_rows, (y_rows, weight_rows))``, or ``(X_rows, empty tensor)`` without
    targets.
    """

    def __init__(self, X, y=None, weight=None):
        self.X, self.y, self.weight = X, y, weight
        # shares the array's memory; a read-only array (a memory map opened 'r') stays a
        # NumPy array, gathered with NumPy (torch refuses to wrap it without a copy warning)
        self._X = X if isinstance(X, np.ndarray) and not X.flags.writeable \
            else torch.as_tensor(X)
        self._y = None if y is None else torch.as_tensor(y)
        self._w = None if weight is None else torch.as_tensor(weight)

    def __len__(self):
        return len(self._X)

    def _inputs(self, index):
        if isinstance(self._X, np.ndarray):
            index = index.numpy() if torch.is_tensor(index) else index
            return torch.from_numpy(np.array(self._X[index]))
        return self._X[index]

    def __getitem__(self, i):
        if self._y is None:
            return self._inputs(i), _NO_TARGET
        return self._inputs(i), (self._y[i], self._w[i])

    def rows(self, index):
        """The batch of the rows ``index`` (a 1-D integer tensor)."""
        if self._y is None:
            return self._inputs(index), _NO_TARGET
        return self._inputs(index), (self._y[index], self._w[index])

    def with_weight(self, weight):
        """The same rows and targets with other weights."""
        return RowData(self.X, self.y, weight)


def row_source(dataset):
    """``(RowData, row indices or None)`` behind ``dataset`` (a RowData or an index Subset of
    one), or None for any other dataset."""
    if isinstance(dataset, RowData):
        return dataset, None
    if isinstance(dataset, Subset) and isinstance(dataset.dataset, RowData):
        return dataset.dataset, torch.as_tensor(np.asarray(dataset.indices, dtype=np.int64))
    return None


class RowBatches:
    """Mini-batches of a :class:`RowData` (or an index ``Subset`` of one): an iterable that
    can be iterated many times, in a new order each time when ``shuffle``; the order is drawn
    from ``generator`` as a ``DataLoader`` with ``RandomSampler`` draws it."""

    def __init__(self, dataset, batch_size, shuffle=False, generator=None, drop_last=False):
        self.dataset = dataset
        self.source, self.indices = row_source(dataset)
        self.batch_size, self.shuffle = int(batch_size), bool(shuffle)
        self.generator, self.drop_last = generator, bool(drop_last)

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        if self.generator is not None:
            # a DataLoader draws its workers' base seed from the generator first
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        order = None
        if self.shuffle:
            order = torch.randperm(n, generator=self.generator)
            # and its RandomSampler draws a second permutation for the rows beyond whole
            # passes (none) once the first is used up: drawn too, so that the next epoch's
            # order is the DataLoader's
            torch.randperm(n, generator=self.generator)
        for start in range(0, n, self.batch_size):
            stop = min(start + self.batch_size, n)
            if self.drop_last and stop - start < self.batch_size:
                return
            index = torch.arange(start, stop) if order is None else order[start:stop]
            if self.indices is not None:
                index = self.indices[index]
            yield self.source.rows(index)


def batch_targets(yi):
    """``(targets, weights)`` of a batch's target part; weights None when it has none."""
    if isinstance(yi, (tuple, list)) and len(yi) == 2:
        return yi[0], yi[1]
    return yi, None
