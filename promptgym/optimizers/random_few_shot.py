"""synalinks' module path of :class:`RandomFewShot` (``synalinks.optimizers.random_few_shot.RandomFewShot``).

>>> from promptgym.optimizers.random_few_shot import RandomFewShot
"""

from promptgym.optimizers.few_shot import RandomFewShot

__all__ = ["RandomFewShot"]
