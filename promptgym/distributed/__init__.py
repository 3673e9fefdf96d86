"""Rollouts on Ray and runs submitted to a Ray cluster (``pip install 'promptgym[distributed]'``)."""
