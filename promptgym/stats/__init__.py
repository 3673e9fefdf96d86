"""Honest numbers: confidence intervals over examples and paired before/after tests.

    from promptgym.stats import bootstrap_interval, paired_test

    bootstrap_interval(scores).low          # 95% bootstrap interval of the mean, seeded
    paired_test(before, after).p_value      # McNemar exact for 0/1 scores, paired bootstrap otherwise

``evaluate()`` returns an :class:`Evaluation`: the usual ``{"reward": ...}`` dict
whose ``interval()`` and ``compare(baseline)`` use the scores it already has.
"""

from promptgym.stats.evaluation import Evaluation
from promptgym.stats.intervals import Interval, bootstrap_interval
from promptgym.stats.paired import PairedTest, format_p, mcnemar_exact_p, paired_test

__all__ = ["Evaluation", "Interval", "PairedTest", "bootstrap_interval", "format_p", "mcnemar_exact_p", "paired_test"]
