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
from torch.utils.data import Dataset, IterableDataset, Subset

#: the target of a batch without targets (prediction), as skorch's ``Dataset`` gives it
_NO_TARGET = torch.zeros(0)


class RowData(Dataset):
    """``X`` (n, ...), optional targets ``y`` (n, ...) and their weights (the shape of ``y``).

    A batch is ``(X_rows, (y_rows, weight_rows))``, ``(X_rows, y_rows)`` when every weight is
    1 or none is given (the losses then need no product with them), or ``(X_rows, empty
    tensor)`` without targets.
    """

    def __init__(self, X, y=None, weight=None):
        self.X, self.y, self.weight = X, y, weight
        # shares the array's memory; a read-only array (a memory map opened 'r') stays a
        # NumPy array, gathered with NumPy (torch refuses to wrap it without a copy warning)
        self._X = X if (isinstance(X, DatasetRows) or isinstance(X, np.ndarray)
                        and not X.flags.writeable) else torch.as_tensor(X)
        self._y = None if y is None else torch.as_tensor(y)
        self._w = (None if weight is None or y is None or np.all(np.asarray(weight) == 1)
                   else torch.as_tensor(weight))

    def __len__(self):
        return len(self._X)

    def _inputs(self, index):
        if isinstance(self._X, DatasetRows):
            return torch.from_numpy(self._X[index])
        if isinstance(self._X, np.ndarray):
            index = index.numpy() if torch.is_tensor(index) else index
            return torch.from_numpy(np.array(self._X[index]))
        return self._X[index]

    def __getitem__(self, i):
        if self._y is None:
            return self._inputs(i), _NO_TARGET
        if self._w is None:
            return self._inputs(i), self._y[i]
        return self._inputs(i), (self._y[i], self._w[i])

    def rows(self, index):
        """The batch of the rows ``index`` (a 1-D integer tensor)."""
        if self._y is None:
            return self._inputs(index), _NO_TARGET
        if self._w is None:
            return self._inputs(index), self._y[index]
        return self._inputs(index), (self._y[index], self._w[index])

    def with_weight(self, weight):
        """The same rows and targets with other weights."""
        return RowData(self.X, self.y, weight)


def _input_part(item):
    """The input of one dataset item: ``x`` of an ``(x, y)`` pair (skorch's convention) or the
    item itself."""
    return item[0] if isinstance(item, (tuple, list)) else item


def _as_float32(x):
    if torch.is_tensor(x):
        x = x.detach().cpu().numpy()
    try:
        return np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"a dataset item's input must be an array or a tensor of numbers, got "
                        f"{type(x).__name__}") from exc


class DatasetRows:
    """The inputs of a torch ``Dataset`` as rows read when they are indexed (never all at once).

    ``fit(dataset)`` and ``predict(dataset)`` take a map-style ``Dataset`` whose items are
    ``(x, y)`` (skorch's convention) or ``x``: indexing (a slice, integer rows or a mask) reads
    those items and stacks their inputs as one float32 array, checked finite; :meth:`take`
    selects rows without reading them; :meth:`targets` reads every item's ``y`` once (a fit's
    labels). Every item's input must have the first item's shape.
    """

    def __init__(self, dataset, index=None):
        if isinstance(dataset, np.ndarray):
            # a memory map of another dtype (cast_on_read): checked once, before any batch
            check_finite_rows(dataset)
        if isinstance(dataset, DatasetRows):
            base = dataset.index
            dataset = dataset.dataset
            index = base if index is None else (np.arange(len(dataset)) if base is None
                                                else base)[np.asarray(index)]
        if isinstance(dataset, IterableDataset) or not hasattr(type(dataset), "__len__"):
            raise TypeError(f"{type(dataset).__name__} has no rows to index (an iterable-style "
                            "dataset): pass a map-style Dataset, with __len__ and "
                            "__getitem__, or arrays")
        self.dataset = dataset
        self.index = None if index is None else np.asarray(index, dtype=np.int64)
        n = len(dataset) if self.index is None else len(self.index)
        if n == 0:
            raise ValueError("the dataset has no rows")
        first = _as_float32(_input_part(dataset[self._position(0)]))
        self.shape = (n, *first.shape)
        self.ndim, self.dtype = len(self.shape), np.dtype(np.float32)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"DatasetRows({type(self.dataset).__name__}, shape={self.shape})"

    def _position(self, i):
        return int(i) if self.index is None else int(self.index[i])

    def _positions(self, index):
        n = len(self)
        if isinstance(index, slice):
            return np.arange(n)[index]
        index = np.asarray(index.numpy() if torch.is_tensor(index) else index)
        if index.dtype == bool:
            if index.shape != (n,):
                raise IndexError(f"a boolean mask over {n} rows has shape {index.shape}")
            return np.flatnonzero(index)
        return np.arange(n)[index]

    def take(self, index):
        """The rows ``index`` (a slice, integers or a mask) as another :class:`DatasetRows`."""
        return DatasetRows(self, self._positions(index))

    def __getitem__(self, index):
        scalar = np.ndim(index) == 0 and not isinstance(index, slice)
        rows = self._positions(np.atleast_1d(index) if scalar else index)
        if isinstance(self.dataset, np.ndarray):
            # a memory map of another dtype (cast_on_read), checked finite when wrapped: one
            # gather, cast to float32
            where = rows if self.index is None else self.index[rows]
            out = np.asarray(self.dataset[where], dtype=np.float32)
            return out[0] if scalar else out
        out = np.empty((len(rows), *self.shape[1:]), dtype=np.float32)
        for j, i in enumerate(rows):
            x = _as_float32(_input_part(self.dataset[self._position(i)]))
            if x.shape != self.shape[1:]:
                raise ValueError(f"the dataset's row {self._position(i)} has an input of shape "
                                 f"{x.shape}, the first row's is {self.shape[1:]}")
            out[j] = x
        if not np.isfinite(out).all():
            bad = self._position(rows[np.flatnonzero(~np.isfinite(out.reshape(len(rows), -1))
                                                     .all(axis=1))[0]])
            raise ValueError(f"the dataset's row {bad} has NaN or infinity in its input")
        return out[0] if scalar else out

    def __array__(self, dtype=None, copy=None):
        out = self[:]
        return out if dtype is None else out.astype(dtype)

    def targets(self):
        """Every row's ``y`` (the second part of its item), as one array."""
        values = []
        for i in range(len(self)):
            item = self.dataset[self._position(i)]
            if not (isinstance(item, (tuple, list)) and len(item) >= 2):
                raise ValueError("y is None and the dataset's items are not (x, y) pairs: pass "
                                 "y, or a dataset whose items carry their target")
            y = item[1]
            values.append(y.detach().cpu().numpy() if torch.is_tensor(y) else np.asarray(y))
        return np.stack(values)


def cast_on_read(X):
    """Whether ``X`` is a memory map of numbers other than float32 (``np.save`` of float64
    data, opened with ``mmap_mode``): read as :class:`DatasetRows`, a batch at a time and cast
    then, instead of converted whole into a float32 copy in memory."""
    return (isinstance(X, np.memmap) and X.ndim >= 2 and len(X) > 0
            and X.dtype.kind in "fiu" and X.dtype != np.float32)


def _chunks(X, dtype, chunk=65536):
    """``(first row, rows)`` of ``X`` read ``chunk`` rows at a time as ``dtype`` (a memory map
    is never read whole into memory)."""
    for start in range(0, len(X), chunk):
        yield start, np.asarray(X[start:start + chunk], dtype=dtype)


def check_finite_rows(X, chunk=65536):
    """Raise a ValueError naming the first row of ``X`` with NaN or infinity as float32 (a
    value beyond float32's range too), reading ``chunk`` rows at a time."""
    for start, part in _chunks(X, np.float32, chunk):
        finite = np.isfinite(part.reshape(len(part), -1)).all(axis=1)
        if not finite.all():
            row = start + int(np.flatnonzero(~finite)[0])
            raise ValueError(f"X contains NaN or infinity in row {row}")


def as_dataset_rows(X):
    """``X`` as a :class:`DatasetRows` (itself when it is one: its first row is not read
    again)."""
    return X if isinstance(X, DatasetRows) else DatasetRows(X)


def take_rows(X, index):
    """``X[index]``, except that the rows of a :class:`DatasetRows` are not read."""
    return X.take(index) if isinstance(X, DatasetRows) else X[index]


def max_abs(X, chunk=65536):
    """The largest absolute value in ``X``, read a chunk of rows at a time (0 when empty)."""
    return max((float(np.abs(part).max()) for _, part in _chunks(X, np.float64, chunk)
                if part.size), default=0.0)


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
