"""The table ``fit`` prints with ``verbose``: short at 1, every history column at 2."""

import sys
import time
from numbers import Number

from skorch.callbacks import PrintLog
from skorch.utils import Ansi

#: the columns of ``history`` that describe the sampler's internals: shown from ``verbose=2``
DIAGNOSTIC_KEYS = frozenset({"task_weights_mean", "task_weights_std", "trunk_repulsion",
                             "head_repulsion", "trunk_drive_norm", "head_drive_norm"})


class ProgressLog(PrintLog):
    """skorch's ``PrintLog`` (the estimators' ``print_log`` callback) with a readable row.

    ``verbose=1`` prints one row per epoch, under 100 characters: the epoch against the fit's
    budget (``7/40``), the training and validation losses, the early-stopping epoch kept so far
    (MT-SGD) or the draws collected (L2E), the columns of callbacks a user added, the epoch's
    seconds and the seconds since ``fit`` began. ``verbose=2`` adds the sampler's internals
    (:data:`DIAGNOSTIC_KEYS`: the repulsion / drive ratios and norms, the task weights),
    rounded. The best losses are coloured only when the table goes to a
    terminal, never into a pipe or a log file. Every column stays in ``history`` either way.
    skorch's parameters (``keys_ignored``, ``sink``, ``tablefmt``, ``floatfmt``) still apply:
    ``callbacks__print_log__floatfmt='.6f'``.
    """

    def on_train_begin(self, net, **kwargs):
        self.start_ = time.perf_counter()

    def on_epoch_end(self, net, **kwargs):
        self.verbose_ = net.verbose
        offset = getattr(net, "_epoch_offset", 0)
        self.budget_ = offset + getattr(net, "max_epochs_", net.max_epochs)
        self.colour_ = self.sink is print and sys.stdout.isatty()
        if self.sink is print and not net.verbose:
            return                   # a table nobody would see (another sink gets every row)
        super().on_epoch_end(net, **kwargs)

    def table(self, row):
        row = dict(row)
        if "epoch" in row and getattr(self, "budget_", None):
            row["epoch"] = f"{row['epoch']}/{self.budget_}"
        if "dur" in row:
            row["elapsed"] = time.perf_counter() - getattr(self, "start_", time.perf_counter())
        return super().table(row)

    def _sorted_keys(self, keys):
        keys = super()._sorted_keys(keys)
        if getattr(self, "verbose_", 1) < 2:
            keys = [k for k in keys if k not in DIAGNOSTIC_KEYS]
        # the epoch and the losses first, the clock (the epoch's, the fit's seconds) last
        first = [k for k in ("epoch", "train_loss", "valid_loss") if k in keys]
        clock = [k for k in ("dur", "elapsed") if k in keys]
        return first + [k for k in keys if k not in first + clock] + clock

    def format_row(self, row, key, color):
        value = row[key]
        if key in ("dur", "elapsed") and isinstance(value, Number):
            return f"{value:.1f}s" if value >= 10 else f"{value:.2f}s"
        if isinstance(value, (list, tuple)) and all(isinstance(v, Number) for v in value):
            return "[" + ", ".join(f"{v:.3g}" for v in value) + "]"
        if isinstance(value, Number) and not isinstance(value, bool):
            if float(value).is_integer():
                return str(int(value))
            text = f"{value:{self.floatfmt}}"
            if getattr(self, "colour_", False) and row.get(key + "_best"):
                return color + text + Ansi.ENDC.value
            return text
        return super().format_row(row, key, color)
