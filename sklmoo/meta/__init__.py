"""L2E meta-training: ES gradients, meta-losses, task distribution, training loop and CLI,
and the meta-sampler sklmoo ships (``pretrained/``)."""

from ._es import antithetic_es_gradient
from ._inner import bma_meta_loss, ce_meta_loss, run_chains
from ._tasks import HELD_OUT, Task, TaskDistribution, digits_task, synthetic_task
from ._train import MetaTrainer, load_default_meta_sampler, warm_start

__all__ = ["antithetic_es_gradient", "bma_meta_loss", "ce_meta_loss", "run_chains",
           "Task", "TaskDistribution", "digits_task", "synthetic_task", "HELD_OUT",
           "MetaTrainer", "load_default_meta_sampler", "warm_start"]
