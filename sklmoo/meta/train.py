"""``python -m sklmoo.meta.train --out DIR --outer-steps N ...``: meta-train an L2E sampler."""

from ._train import main

if __name__ == "__main__":
    main()
