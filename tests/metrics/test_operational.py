"""Operational metrics read each model's ledger by phase (synalinks' counters and formulas)."""

from __future__ import annotations

import promptgym as pg
from promptgym.lm.usage import add_phase_wall_clock_s, current_op_scope, lm_phase, read_phase_wall_clock_s
from tests.support import Question, echo_lm, functional_program


async def test_inference_metrics_count_calls_outside_any_phase_and_not_the_reward_phase():
    lm = echo_lm()
    program = await functional_program(lm)
    tokens, calls, program_calls = pg.metrics.TotalTokens(), pg.metrics.LMCalls(), pg.metrics.ProgramCalls()
    reward_tokens = pg.metrics.RewardTotalTokens()
    for metric in (tokens, calls, program_calls, reward_tokens):
        metric.bind_program(program)
    await program(Question(question="a"))
    with lm_phase("reward"):
        await program(Question(question="b"))
    inference = lm.usage.by_phase["inference"]
    assert calls.result() == 1 and program_calls.result() == 1
    assert tokens.result() == inference.prompt_tokens + inference.completion_tokens > 0
    reward = lm.usage.by_phase["reward"]
    assert reward_tokens.result() == reward.prompt_tokens + reward.completion_tokens > 0
    assert program.reward_cumulated_invocations == 1


def test_phase_counters_can_be_set_and_failures_are_counted_apart():
    lm = echo_lm()
    lm.reward_cumulated_calls = 3
    lm.reward_cumulated_failed_calls = 1
    assert lm.reward_cumulated_calls == 3 and lm.usage.by_phase["reward"].calls == 4
    error_rate = pg.metrics.RewardErrorRate()
    error_rate.program = None
    assert error_rate.result() == 0.0  # unbound: nothing read


async def test_rates_divide_by_the_phase_wall_clock_else_by_the_calls_latency():
    lm = echo_lm()
    program = await functional_program(lm)
    throughput = pg.metrics.Throughput()
    throughput.bind_program(program)
    lm.inference_cumulated_calls += 4
    lm.inference_cumulated_elapsed_s += 8.0
    assert throughput.result() == 0.5  # no lm_phase block timed inference: 4 calls / 8 s of latency
    add_phase_wall_clock_s("inference", 2.0)
    assert throughput.result() == 2.0  # 4 calls / 2 s of wall clock


def test_nested_phases_credit_their_own_time_only():
    pg.clear_session()
    assert current_op_scope() is None
    with lm_phase("optimizer"):
        with lm_phase("reward"):
            assert current_op_scope() == "reward"
        assert current_op_scope() == "optimizer"
    reward, optimizer = read_phase_wall_clock_s("reward"), read_phase_wall_clock_s("optimizer")
    assert 0 < reward and 0 < optimizer
    pg.clear_session()
    assert read_phase_wall_clock_s("optimizer") == 0.0


class _CachingServer:
    """A backend that reports provider-side cache and reasoning tokens, as OpenAI and Anthropic do."""

    concurrency = 1

    async def complete(self, request):
        from promptgym.lm.engine import LMResponse, usage_details

        usage = {"prompt_tokens_details": {"cached_tokens": 90}, "cache_creation_input_tokens": 10,
                 "completion_tokens_details": {"reasoning_tokens": 30}}
        return LMResponse(content="ok", prompt_tokens=100, completion_tokens=40, cost=0.5, **usage_details(usage))


async def test_provider_cache_and_reasoning_tokens_reach_the_metrics():
    lm = echo_lm(caching=False)
    lm._engine = _CachingServer()
    program = await functional_program(lm)
    metrics = [pg.metrics.CachedTokens(), pg.metrics.CacheHitRate(), pg.metrics.ReasoningTokenShare(), pg.metrics.Cost()]
    for metric in metrics:
        metric.bind_program(program)
    assert await lm([{"role": "user", "content": "hi"}]) == "ok"
    assert [metric.result() for metric in metrics] == [90, 0.9, 0.75, 0.5]
    assert lm.cumulated_cache_creation_tokens == 10 and lm.last_call_tokens == 140
