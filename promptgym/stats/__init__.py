"""Honest numbers: confidence intervals over examples and paired before/after tests.

    from promptgym.stats import confidence_interval, paired_test

    confidence_interval(scores).low         # 95%: Wilson for 0/1 scores, seeded bootstrap otherwise
    paired_test(before, after).p_value      # McNemar exact for 0/1 scores, paired bootstrap otherwise

``evaluate()`` returns an :class:`Evaluation`: the usual ``{"reward": ...}`` dict
whose ``interval()`` and ``compare(baseline)`` use the scores it already has.
:func:`token_rule` is how a candidate that costs more tokens per call must win (docs/cost.md).
"""

from promptgym.stats.evaluation import Evaluation
from promptgym.stats.intervals import Interval, confidence_interval
from promptgym.stats.paired import PairedTest, format_p, mcnemar_exact_p, paired_test
from promptgym.stats.token_rule import set_token_rule, token_rule

__all__ = ["Evaluation", "Interval", "PairedTest", "confidence_interval", "format_p", "mcnemar_exact_p", "paired_test",
           "set_token_rule", "token_rule"]
